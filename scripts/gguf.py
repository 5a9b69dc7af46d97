"""gguf.py — a small GGUF writer and reader in plain Python 3 (stdlib only).

Writing (keys and tensors in insertion order, laid out as llama.cpp's gguf writer does it:
version 3, zero padding to the alignment after the tensor infos and after every tensor's
data, offsets from the start of the data section):

    import gguf
    w = gguf.GGUFWriter()                       # alignment 32 unless general.alignment is set
    w.add_string("general.architecture", "llama")
    w.add_uint32("llama.block_count", 2)
    w.add_float32("llama.rope.freq_base", 10000.0)
    w.add_array("tokenizer.ggml.tokens", ["a", "b"])             # element type inferred ...
    w.add_array("tokenizer.ggml.token_type", [1, 3], gguf.INT32)  # ... or given
    w.add_tensor("output_norm.weight", gguf.F32, [256], raw_bytes)  # shape in GGUF ne order
    w.write("model.gguf")                        # or w.to_bytes()

add_tensor takes the tensor's raw bytes (already in the type's block format) and its shape
in GGUF order: ne[0] first, the contiguous dimension (a numpy array of shape (rows, cols)
has ne = [cols, rows]). The byte count is checked against the shape for the types below.

Reading:

    kv, tensors, data_offset = gguf.read_gguf("model.gguf")
    kv["llama.block_count"]          -> 2            (arrays are Python lists)
    gguf.read_gguf_types(path)       -> {key: value type id} (and elem type for arrays)
    tensors[0] -> {"name", "n_dims", "ne", "type", "offset", "n_bytes", "data_offset"}
                  (offset: from the data section; data_offset: absolute, in the file)

The file format (all integers little-endian) is the byte table in src/core/gguf.h.
"""
import struct

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
DEFAULT_ALIGNMENT = 32

# value types
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
_SCALAR = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
           FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}
VALUE_TYPE_NAMES = {UINT8: "u8", INT8: "i8", UINT16: "u16", INT16: "i16", UINT32: "u32", INT32: "i32",
                    FLOAT32: "f32", BOOL: "bool", STRING: "string", ARRAY: "array", UINT64: "u64",
                    INT64: "i64", FLOAT64: "f64"}

# tensor types (ggml ids) -> (elements per block, bytes per block)
F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 = 0, 1, 2, 3, 6, 7, 8, 9
Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K = 10, 11, 12, 13, 14, 15
I8, I16, I32, I64, F64, BF16 = 24, 25, 26, 27, 28, 30
TYPE_SIZES = {F32: (1, 4), F16: (1, 2), Q4_0: (32, 18), Q4_1: (32, 20), Q5_0: (32, 22),
              Q5_1: (32, 24), Q8_0: (32, 34), Q8_1: (32, 36), Q2_K: (256, 84), Q3_K: (256, 110),
              Q4_K: (256, 144), Q5_K: (256, 176), Q6_K: (256, 210), Q8_K: (256, 292),
              I8: (1, 1), I16: (1, 2), I32: (1, 4), I64: (1, 8), F64: (1, 8), BF16: (1, 2)}
TYPE_NAMES = {F32: "f32", F16: "f16", Q4_0: "q4_0", Q4_1: "q4_1", Q5_0: "q5_0", Q5_1: "q5_1",
              Q8_0: "q8_0", Q8_1: "q8_1", Q2_K: "q2_k", Q3_K: "q3_k", Q4_K: "q4_k", Q5_K: "q5_k",
              Q6_K: "q6_k", Q8_K: "q8_k", I8: "i8", I16: "i16", I32: "i32", I64: "i64",
              F64: "f64", BF16: "bf16"}


def tensor_nbytes(type_id, ne):
    """Bytes of a tensor of shape ne (GGUF order) and type; ValueError if rows do not fit."""
    if type_id not in TYPE_SIZES:
        raise ValueError(f"unknown tensor type {type_id}")
    blk, size = TYPE_SIZES[type_id]
    if ne[0] % blk:
        raise ValueError(f"row of {ne[0]} elements is not a multiple of {blk} ({TYPE_NAMES[type_id]})")
    n = 1
    for d in ne:
        n *= d
    return n // blk * size


def _pad(n, align):
    return (align - n % align) % align


def _enc_str(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _infer_type(v):
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, int):
        return INT32 if -2**31 <= v < 2**31 else INT64
    if isinstance(v, float):
        return FLOAT32
    if isinstance(v, (str, bytes)):
        return STRING
    if isinstance(v, (list, tuple)):
        return ARRAY
    raise TypeError(f"no GGUF type for {type(v).__name__}")


def _enc_value(vtype, v, elem_type=None):
    """The payload of a value (without its type id)."""
    if vtype == STRING:
        return _enc_str(v)
    if vtype == ARRAY:
        items = list(v)
        if elem_type is None:
            elem_type = _infer_type(items[0]) if items else INT32
            if elem_type == INT32 and any(not -2**31 <= x < 2**31 for x in items):
                elem_type = INT64
        head = struct.pack("<IQ", elem_type, len(items))
        if elem_type == STRING:
            return head + b"".join(_enc_str(x) for x in items)
        if elem_type == ARRAY:
            return head + b"".join(_enc_value(ARRAY, x) for x in items)
        return head + struct.pack("<%d%s" % (len(items), _SCALAR[elem_type][1]), *items)
    if vtype in _SCALAR:
        return struct.pack(_SCALAR[vtype], v)
    raise ValueError(f"unknown value type {vtype}")


class GGUFWriter:
    """Collects keys and tensors, then writes one GGUF (version 3) file."""

    def __init__(self, alignment=None):
        self._kv = []          # (key, encoded bytes including the type id)
        self._keys = set()
        self._tensors = []     # (name, ne, type_id, data)
        self._alignment = alignment

    # ---- keys
    def add_key_value(self, key, value, vtype, elem_type=None):
        if key in self._keys:
            raise ValueError(f"duplicate key {key}")
        if key == "general.alignment":
            if vtype != UINT32 or value <= 0 or value & (value - 1):
                raise ValueError("general.alignment must be a u32 power of two")
            self._alignment = value
        self._keys.add(key)
        self._kv.append((key, _enc_str(key) + struct.pack("<I", vtype) + _enc_value(vtype, value, elem_type)))

    def add_uint8(self, key, v): self.add_key_value(key, v, UINT8)
    def add_int8(self, key, v): self.add_key_value(key, v, INT8)
    def add_uint16(self, key, v): self.add_key_value(key, v, UINT16)
    def add_int16(self, key, v): self.add_key_value(key, v, INT16)
    def add_uint32(self, key, v): self.add_key_value(key, v, UINT32)
    def add_int32(self, key, v): self.add_key_value(key, v, INT32)
    def add_float32(self, key, v): self.add_key_value(key, v, FLOAT32)
    def add_uint64(self, key, v): self.add_key_value(key, v, UINT64)
    def add_int64(self, key, v): self.add_key_value(key, v, INT64)
    def add_float64(self, key, v): self.add_key_value(key, v, FLOAT64)
    def add_bool(self, key, v): self.add_key_value(key, bool(v), BOOL)
    def add_string(self, key, v): self.add_key_value(key, v, STRING)

    def add_array(self, key, values, elem_type=None):
        """An array; elem_type (a value type id) is inferred from the first item if None."""
        self.add_key_value(key, values, ARRAY, elem_type)

    # ---- tensors
    def add_tensor(self, name, type_id, shape, data):
        """shape: GGUF ne order (ne[0] contiguous); data: the raw bytes of the tensor."""
        if any(t[0] == name for t in self._tensors):
            raise ValueError(f"duplicate tensor {name}")
        if len(name.encode("utf-8")) >= 64:
            raise ValueError(f"tensor name {name!r} is 64 bytes or more (llama.cpp's limit)")
        ne = [int(d) for d in shape]
        if not 1 <= len(ne) <= 4 or any(d < 1 for d in ne):
            raise ValueError(f"tensor {name}: bad shape {ne}")
        data = bytes(data)
        if type_id in TYPE_SIZES and tensor_nbytes(type_id, ne) != len(data):
            raise ValueError(f"tensor {name}: {len(data)} bytes, shape {ne} of "
                             f"{TYPE_NAMES[type_id]} needs {tensor_nbytes(type_id, ne)}")
        self._tensors.append((name, ne, int(type_id), data))

    # ---- output
    def to_bytes(self):
        align = self._alignment or DEFAULT_ALIGNMENT
        out = bytearray(GGUF_MAGIC)
        out += struct.pack("<IQQ", GGUF_VERSION, len(self._tensors), len(self._kv))
        for _, enc in self._kv:
            out += enc
        offset = 0
        for name, ne, type_id, data in self._tensors:
            out += _enc_str(name) + struct.pack("<I", len(ne))
            out += struct.pack("<%dQ" % len(ne), *ne)
            out += struct.pack("<IQ", type_id, offset)
            offset += len(data) + _pad(len(data), align)
        out += bytes(_pad(len(out), align))
        for _, _, _, data in self._tensors:
            out += data
            out += bytes(_pad(len(data), align))
        return bytes(out)

    def write(self, path):
        with open(path, "wb") as f:
            f.write(self.to_bytes())


# ---------------------------------------------------------------- reading

class _Truncated(ValueError):
    pass


class _Cursor:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, n):
        if self.pos + n > len(self.buf):
            raise _Truncated(f"GGUF truncated at byte {self.pos} (needs {n} more)")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))

    def string(self):
        (n,) = self.unpack("<Q")
        return bytes(self.take(n)).decode("utf-8", errors="surrogateescape")

    def value(self, vtype, types_out=None):
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            elem_type, count = self.unpack("<IQ")
            if types_out is not None:
                types_out.append(elem_type)
            if elem_type in _SCALAR and elem_type != BOOL:
                fmt = "<%d%s" % (count, _SCALAR[elem_type][1])
                return list(struct.unpack(fmt, self.take(struct.calcsize(fmt))))
            return [self.value(elem_type) for _ in range(count)]
        if vtype in _SCALAR:
            return self.unpack(_SCALAR[vtype])[0]
        raise ValueError(f"unknown value type {vtype} at byte {self.pos}")


def _parse(buf, want_types=False):
    c = _Cursor(buf)
    if bytes(c.take(4)) != GGUF_MAGIC:
        raise ValueError("not a GGUF file (bad magic)")
    version, n_tensors, n_kv = c.unpack("<IQQ")
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version} is not supported")
    kv, types = {}, {}
    for _ in range(n_kv):
        key = c.string()
        (vtype,) = c.unpack("<I")
        extra = []
        kv[key] = c.value(vtype, extra)
        types[key] = (vtype, extra[0]) if vtype == ARRAY else vtype
    tensors = []
    for _ in range(n_tensors):
        name = c.string()
        (n_dims,) = c.unpack("<I")
        ne = list(c.unpack("<%dQ" % n_dims))
        type_id, offset = c.unpack("<IQ")
        nbytes = tensor_nbytes(type_id, ne) if type_id in TYPE_SIZES else None
        tensors.append(dict(name=name, n_dims=n_dims, ne=ne, type=type_id, offset=offset, n_bytes=nbytes))
    align = kv.get("general.alignment", DEFAULT_ALIGNMENT)
    data_offset = c.pos + _pad(c.pos, align)
    for t in tensors:
        t["data_offset"] = data_offset + t["offset"]
    return (kv, tensors, data_offset, types) if want_types else (kv, tensors, data_offset)


def _parse_file(path, want_types):
    # Only the header is read: the first 16 MiB, more if the header is longer.
    with open(path, "rb") as f:
        size = 16 << 20
        while True:
            f.seek(0)
            buf = f.read(size)
            try:
                return _parse(buf, want_types)
            except _Truncated:
                if len(buf) < size:
                    raise
                size *= 4


def read_gguf(path):
    """(kv dict, tensor infos, data offset) of the GGUF file at path (its header only)."""
    return _parse_file(path, False)


def read_gguf_types(path):
    """{key: value type id, or (ARRAY, element type id)} of the GGUF file at path."""
    return _parse_file(path, True)[3]


def read_tensor_bytes(path, tensor):
    """The raw bytes of one tensor info returned by read_gguf."""
    if tensor["n_bytes"] is None:
        raise ValueError(f"unknown size for tensor type {tensor['type']}")
    with open(path, "rb") as f:
        f.seek(tensor["data_offset"])
        return f.read(tensor["n_bytes"])
