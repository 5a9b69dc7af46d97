/* webgpu.h — lean's own declarations of the part of the standard webgpu.h C API it uses,
 * and the table of function pointers the loader (native.c) fills with dlsym.
 *
 * Written against the library lean installs (Dawn from bun-webgpu-linux-x64@0.1.7, 2025):
 * every struct layout here is the library's own, as its debug info describes it
 * (/work/shared/webgpu/dawn-layouts.txt; tests/test_gpu_device.c checks sizes and offsets).
 * Older public headers differ: WGPULimits ends with maxImmediateSize (152 bytes), callbacks
 * take (..., userdata1, userdata2), the queue work-done callback carries a message.
 *
 * Conventions of the API: strings are WGPUStringView {data, length}, not NUL-terminated;
 * {NULL, WGPU_STRLEN} is "none", {NULL, 0} the empty string. Enum value 0 is "undefined".
 * Asynchronous calls take a callback-info struct and return a WGPUFuture to wait on.
 *
 * Sections: handles | enums and flags | structs | callbacks | the function table. */
#ifndef LEAN_WEBGPU_H
#define LEAN_WEBGPU_H

#include <stddef.h>
#include <stdint.h>

/* ---- handles (opaque, reference-counted by the library) ---- */
typedef struct WGPUInstanceImpl *WGPUInstance;
typedef struct WGPUAdapterImpl *WGPUAdapter;
typedef struct WGPUDeviceImpl *WGPUDevice;
typedef struct WGPUQueueImpl *WGPUQueue;
typedef struct WGPUBufferImpl *WGPUBuffer;
typedef struct WGPUShaderModuleImpl *WGPUShaderModule;
typedef struct WGPUBindGroupLayoutImpl *WGPUBindGroupLayout;
typedef struct WGPUBindGroupImpl *WGPUBindGroup;
typedef struct WGPUPipelineLayoutImpl *WGPUPipelineLayout;
typedef struct WGPUComputePipelineImpl *WGPUComputePipeline;
typedef struct WGPUCommandEncoderImpl *WGPUCommandEncoder;
typedef struct WGPUComputePassEncoderImpl *WGPUComputePassEncoder;
typedef struct WGPUCommandBufferImpl *WGPUCommandBuffer;
typedef struct WGPUSurfaceImpl *WGPUSurface;
typedef struct WGPUSamplerImpl *WGPUSampler;
typedef struct WGPUTextureViewImpl *WGPUTextureView;
typedef struct WGPUQuerySetImpl *WGPUQuerySet;

/* ---- enums and flags (the C enums are 32-bit; flags are 64-bit) ---- */
typedef uint32_t WGPUBool;
typedef uint64_t WGPUFlags;

#define WGPU_STRLEN SIZE_MAX        /* StringView length: NUL-terminated (or "none" with NULL) */
#define WGPU_WHOLE_SIZE UINT64_MAX  /* bind group entry size: to the end of the buffer */

typedef enum WGPUSType {
    WGPUSType_ShaderSourceWGSL = 0x00000002,
} WGPUSType;

typedef enum WGPUFeatureLevel {
    WGPUFeatureLevel_Undefined = 0,
    WGPUFeatureLevel_Compatibility = 1,
    WGPUFeatureLevel_Core = 2,
} WGPUFeatureLevel;

typedef enum WGPUPowerPreference {
    WGPUPowerPreference_Undefined = 0,
    WGPUPowerPreference_LowPower = 1,
    WGPUPowerPreference_HighPerformance = 2,
} WGPUPowerPreference;

typedef enum WGPUBackendType {
    WGPUBackendType_Undefined = 0,
    WGPUBackendType_Null = 1,
    WGPUBackendType_WebGPU = 2,
    WGPUBackendType_D3D11 = 3,
    WGPUBackendType_D3D12 = 4,
    WGPUBackendType_Metal = 5,
    WGPUBackendType_Vulkan = 6,
    WGPUBackendType_OpenGL = 7,
    WGPUBackendType_OpenGLES = 8,
} WGPUBackendType;

typedef enum WGPUAdapterType {
    WGPUAdapterType_DiscreteGPU = 1,
    WGPUAdapterType_IntegratedGPU = 2,
    WGPUAdapterType_CPU = 3,
    WGPUAdapterType_Unknown = 4,
} WGPUAdapterType;

/* Core feature values (0x1-0x12) are the same in every 2025 header; Dawn's own (0x50000+)
 * were renumbered, so lean uses none of them. */
typedef enum WGPUFeatureName {
    WGPUFeatureName_TimestampQuery = 0x03,
    WGPUFeatureName_ShaderF16 = 0x0A,
    WGPUFeatureName_Subgroups = 0x11,
} WGPUFeatureName;

typedef enum WGPUCallbackMode {
    WGPUCallbackMode_WaitAnyOnly = 1,        /* fires only inside wgpuInstanceWaitAny */
    WGPUCallbackMode_AllowProcessEvents = 2, /* ... or inside wgpuInstanceProcessEvents */
    WGPUCallbackMode_AllowSpontaneous = 3,   /* ... or on any thread, at any time */
} WGPUCallbackMode;

typedef enum WGPUWaitStatus {
    WGPUWaitStatus_Success = 1,
    WGPUWaitStatus_TimedOut = 2,
    WGPUWaitStatus_Error = 3,
} WGPUWaitStatus;

/* The request/map/pop/work-done statuses share these values: 1 success, anything else not. */
typedef enum WGPURequestAdapterStatus { WGPURequestAdapterStatus_Success = 1 } WGPURequestAdapterStatus;
typedef enum WGPURequestDeviceStatus { WGPURequestDeviceStatus_Success = 1 } WGPURequestDeviceStatus;
typedef enum WGPUMapAsyncStatus { WGPUMapAsyncStatus_Success = 1 } WGPUMapAsyncStatus;
typedef enum WGPUPopErrorScopeStatus { WGPUPopErrorScopeStatus_Success = 1 } WGPUPopErrorScopeStatus;
typedef enum WGPUQueueWorkDoneStatus { WGPUQueueWorkDoneStatus_Success = 1 } WGPUQueueWorkDoneStatus;
typedef enum WGPUStatus { WGPUStatus_Success = 1, WGPUStatus_Error = 2 } WGPUStatus;

typedef enum WGPUErrorFilter {
    WGPUErrorFilter_Validation = 1,
    WGPUErrorFilter_OutOfMemory = 2,
    WGPUErrorFilter_Internal = 3,
} WGPUErrorFilter;

typedef enum WGPUErrorType {
    WGPUErrorType_NoError = 1,
    WGPUErrorType_Validation = 2,
    WGPUErrorType_OutOfMemory = 3,
    WGPUErrorType_Internal = 4,
    WGPUErrorType_Unknown = 5,
} WGPUErrorType;

typedef enum WGPUDeviceLostReason {
    WGPUDeviceLostReason_Unknown = 1,
    WGPUDeviceLostReason_Destroyed = 2,
    WGPUDeviceLostReason_CallbackCancelled = 3,
    WGPUDeviceLostReason_FailedCreation = 4,
} WGPUDeviceLostReason;

typedef WGPUFlags WGPUBufferUsage;
#define WGPUBufferUsage_MapRead ((WGPUBufferUsage)0x0001)
#define WGPUBufferUsage_CopySrc ((WGPUBufferUsage)0x0004)
#define WGPUBufferUsage_CopyDst ((WGPUBufferUsage)0x0008)
#define WGPUBufferUsage_Uniform ((WGPUBufferUsage)0x0040)
#define WGPUBufferUsage_Storage ((WGPUBufferUsage)0x0080)
#define WGPUBufferUsage_QueryResolve ((WGPUBufferUsage)0x0200)

typedef WGPUFlags WGPUMapMode;
#define WGPUMapMode_Read ((WGPUMapMode)0x0001)

/* ---- structs (offsets in comments are the library's, in bytes, for x86-64) ---- */
typedef struct WGPUStringView {
    const char *data; /* 0x00 */
    size_t length;    /* 0x08: WGPU_STRLEN = up to a NUL */
} WGPUStringView;

typedef struct WGPUChainedStruct {
    struct WGPUChainedStruct *next; /* 0x00 */
    WGPUSType sType;                /* 0x08 */
} WGPUChainedStruct;

typedef struct WGPUFuture {
    uint64_t id;
} WGPUFuture;

typedef struct WGPUFutureWaitInfo {
    WGPUFuture future; /* 0x00 */
    WGPUBool completed; /* 0x08: set by wgpuInstanceWaitAny */
} WGPUFutureWaitInfo;

typedef struct WGPUInstanceCapabilities {
    WGPUChainedStruct *nextInChain; /* 0x00 */
    WGPUBool timedWaitAnyEnable;    /* 0x08: without it WaitAny accepts only a zero timeout */
    size_t timedWaitAnyMaxCount;    /* 0x10 */
} WGPUInstanceCapabilities;

typedef struct WGPUInstanceDescriptor {
    WGPUChainedStruct *nextInChain;        /* 0x00 */
    WGPUInstanceCapabilities capabilities; /* 0x08 */
} WGPUInstanceDescriptor;

typedef struct WGPURequestAdapterOptions {
    WGPUChainedStruct *nextInChain;  /* 0x00 */
    WGPUFeatureLevel featureLevel;   /* 0x08 */
    WGPUPowerPreference powerPreference; /* 0x0c */
    WGPUBool forceFallbackAdapter;   /* 0x10 */
    WGPUBackendType backendType;     /* 0x14 */
    WGPUSurface compatibleSurface;   /* 0x18 */
} WGPURequestAdapterOptions;

typedef struct WGPUAdapterInfo {
    WGPUChainedStruct *nextInChain; /* 0x00 */
    WGPUStringView vendor;          /* 0x08 */
    WGPUStringView architecture;    /* 0x18 */
    WGPUStringView device;          /* 0x28 */
    WGPUStringView description;     /* 0x38 */
    WGPUBackendType backendType;    /* 0x48 */
    WGPUAdapterType adapterType;    /* 0x4c */
    uint32_t vendorID;              /* 0x50 */
    uint32_t deviceID;              /* 0x54 */
    uint32_t subgroupMinSize;       /* 0x58 */
    uint32_t subgroupMaxSize;       /* 0x5c */
} WGPUAdapterInfo;

/* 152 bytes: the 2025 layout (maxImmediateSize last; no per-stage vertex/fragment fields). */
typedef struct WGPULimits {
    WGPUChainedStruct *nextInChain;                    /* 0x00 */
    uint32_t maxTextureDimension1D;                    /* 0x08 */
    uint32_t maxTextureDimension2D;                    /* 0x0c */
    uint32_t maxTextureDimension3D;                    /* 0x10 */
    uint32_t maxTextureArrayLayers;                    /* 0x14 */
    uint32_t maxBindGroups;                            /* 0x18 */
    uint32_t maxBindGroupsPlusVertexBuffers;           /* 0x1c */
    uint32_t maxBindingsPerBindGroup;                  /* 0x20 */
    uint32_t maxDynamicUniformBuffersPerPipelineLayout; /* 0x24 */
    uint32_t maxDynamicStorageBuffersPerPipelineLayout; /* 0x28 */
    uint32_t maxSampledTexturesPerShaderStage;         /* 0x2c */
    uint32_t maxSamplersPerShaderStage;                /* 0x30 */
    uint32_t maxStorageBuffersPerShaderStage;          /* 0x34 */
    uint32_t maxStorageTexturesPerShaderStage;         /* 0x38 */
    uint32_t maxUniformBuffersPerShaderStage;          /* 0x3c */
    uint64_t maxUniformBufferBindingSize;              /* 0x40 */
    uint64_t maxStorageBufferBindingSize;              /* 0x48 */
    uint32_t minUniformBufferOffsetAlignment;          /* 0x50 */
    uint32_t minStorageBufferOffsetAlignment;          /* 0x54 */
    uint32_t maxVertexBuffers;                         /* 0x58 */
    uint64_t maxBufferSize;                            /* 0x60 */
    uint32_t maxVertexAttributes;                      /* 0x68 */
    uint32_t maxVertexBufferArrayStride;               /* 0x6c */
    uint32_t maxInterStageShaderVariables;             /* 0x70 */
    uint32_t maxColorAttachments;                      /* 0x74 */
    uint32_t maxColorAttachmentBytesPerSample;         /* 0x78 */
    uint32_t maxComputeWorkgroupStorageSize;           /* 0x7c */
    uint32_t maxComputeInvocationsPerWorkgroup;        /* 0x80 */
    uint32_t maxComputeWorkgroupSizeX;                 /* 0x84 */
    uint32_t maxComputeWorkgroupSizeY;                 /* 0x88 */
    uint32_t maxComputeWorkgroupSizeZ;                 /* 0x8c */
    uint32_t maxComputeWorkgroupsPerDimension;         /* 0x90 */
    uint32_t maxImmediateSize;                         /* 0x94 */
} WGPULimits;

typedef struct WGPUQueueDescriptor {
    WGPUChainedStruct *nextInChain; /* 0x00 */
    WGPUStringView label;           /* 0x08 */
} WGPUQueueDescriptor;

/* ---- callbacks: every one ends with (userdata1, userdata2); messages are StringViews ---- */
typedef void (*WGPURequestAdapterCallback)(WGPURequestAdapterStatus status, WGPUAdapter adapter,
                                           WGPUStringView message, void *userdata1, void *userdata2);
typedef void (*WGPURequestDeviceCallback)(WGPURequestDeviceStatus status, WGPUDevice device,
                                          WGPUStringView message, void *userdata1, void *userdata2);
typedef void (*WGPUDeviceLostCallback)(const WGPUDevice *device, WGPUDeviceLostReason reason,
                                       WGPUStringView message, void *userdata1, void *userdata2);
typedef void (*WGPUUncapturedErrorCallback)(const WGPUDevice *device, WGPUErrorType type,
                                            WGPUStringView message, void *userdata1, void *userdata2);
/* type: 1 verbose, 2 info, 3 warning, 4 error */
typedef void (*WGPULoggingCallback)(uint32_t type, WGPUStringView message, void *userdata1, void *userdata2);
typedef struct WGPULoggingCallbackInfo { /* no mode field (../shared/webgpu/NOTES.md) */
    WGPUChainedStruct *nextInChain; /* 0x00 */
    WGPULoggingCallback callback;   /* 0x08 */
    void *userdata1;                /* 0x10 */
    void *userdata2;                /* 0x18 */
} WGPULoggingCallbackInfo;
typedef void (*WGPUPopErrorScopeCallback)(WGPUPopErrorScopeStatus status, WGPUErrorType type,
                                          WGPUStringView message, void *userdata1, void *userdata2);
typedef void (*WGPUBufferMapCallback)(WGPUMapAsyncStatus status, WGPUStringView message, void *userdata1,
                                      void *userdata2);
typedef void (*WGPUQueueWorkDoneCallback)(WGPUQueueWorkDoneStatus status, WGPUStringView message,
                                          void *userdata1, void *userdata2);

/* The callback-info structs of asynchronous calls: all one 40-byte shape. mode 0 is invalid. */
#define WGPU_CALLBACK_INFO(NAME, CALLBACK)                                                    \
    typedef struct NAME {                                                                     \
        WGPUChainedStruct *nextInChain; /* 0x00 */                                            \
        WGPUCallbackMode mode;          /* 0x08 */                                            \
        CALLBACK callback;              /* 0x10 */                                            \
        void *userdata1;                /* 0x18 */                                            \
        void *userdata2;                /* 0x20 */                                            \
    } NAME
WGPU_CALLBACK_INFO(WGPURequestAdapterCallbackInfo, WGPURequestAdapterCallback);
WGPU_CALLBACK_INFO(WGPURequestDeviceCallbackInfo, WGPURequestDeviceCallback);
WGPU_CALLBACK_INFO(WGPUDeviceLostCallbackInfo, WGPUDeviceLostCallback);
WGPU_CALLBACK_INFO(WGPUPopErrorScopeCallbackInfo, WGPUPopErrorScopeCallback);
WGPU_CALLBACK_INFO(WGPUBufferMapCallbackInfo, WGPUBufferMapCallback);
WGPU_CALLBACK_INFO(WGPUQueueWorkDoneCallbackInfo, WGPUQueueWorkDoneCallback);
#undef WGPU_CALLBACK_INFO

/* Called synchronously inside the failing call; no mode field. */
typedef struct WGPUUncapturedErrorCallbackInfo {
    WGPUChainedStruct *nextInChain;       /* 0x00 */
    WGPUUncapturedErrorCallback callback; /* 0x08 */
    void *userdata1;                      /* 0x10 */
    void *userdata2;                      /* 0x18 */
} WGPUUncapturedErrorCallbackInfo;

typedef struct WGPUDeviceDescriptor {
    WGPUChainedStruct *nextInChain;                              /* 0x00 */
    WGPUStringView label;                                        /* 0x08 */
    size_t requiredFeatureCount;                                 /* 0x18 */
    const WGPUFeatureName *requiredFeatures;                     /* 0x20 */
    const WGPULimits *requiredLimits;                            /* 0x28: NULL = defaults */
    WGPUQueueDescriptor defaultQueue;                            /* 0x30 */
    WGPUDeviceLostCallbackInfo deviceLostCallbackInfo;           /* 0x48 */
    WGPUUncapturedErrorCallbackInfo uncapturedErrorCallbackInfo; /* 0x70 */
} WGPUDeviceDescriptor;

typedef struct WGPUBufferDescriptor {
    WGPUChainedStruct *nextInChain; /* 0x00 */
    WGPUStringView label;           /* 0x08 */
    WGPUBufferUsage usage;          /* 0x18 */
    uint64_t size;                  /* 0x20: bytes */
    WGPUBool mappedAtCreation;      /* 0x28 */
} WGPUBufferDescriptor;

/* Chained into WGPUShaderModuleDescriptor.nextInChain with sType ShaderSourceWGSL. */
typedef struct WGPUShaderSourceWGSL {
    WGPUChainedStruct chain; /* 0x00 */
    WGPUStringView code;     /* 0x10 */
} WGPUShaderSourceWGSL;

typedef struct WGPUShaderModuleDescriptor {
    WGPUChainedStruct *nextInChain; /* 0x00 */
    WGPUStringView label;           /* 0x08 */
} WGPUShaderModuleDescriptor;

typedef struct WGPUConstantEntry {
    WGPUChainedStruct *nextInChain; /* 0x00 */
    WGPUStringView key;             /* 0x08 */
    double value;                   /* 0x18 */
} WGPUConstantEntry;

typedef struct WGPUComputeState {
    WGPUChainedStruct *nextInChain;     /* 0x00 */
    WGPUShaderModule module;            /* 0x08 */
    WGPUStringView entryPoint;          /* 0x10 */
    size_t constantCount;               /* 0x20 */
    const WGPUConstantEntry *constants; /* 0x28 */
} WGPUComputeState;

typedef struct WGPUComputePipelineDescriptor {
    WGPUChainedStruct *nextInChain; /* 0x00 */
    WGPUStringView label;           /* 0x08 */
    WGPUPipelineLayout layout;      /* 0x18: NULL = "auto", derived from the shader */
    WGPUComputeState compute;       /* 0x20 */
} WGPUComputePipelineDescriptor;

typedef struct WGPUBindGroupEntry {
    WGPUChainedStruct *nextInChain; /* 0x00 */
    uint32_t binding;               /* 0x08 */
    WGPUBuffer buffer;              /* 0x10 */
    uint64_t offset;                /* 0x18: bytes */
    uint64_t size;                  /* 0x20: bytes; WGPU_WHOLE_SIZE = to the end */
    WGPUSampler sampler;            /* 0x28 */
    WGPUTextureView textureView;    /* 0x30 */
} WGPUBindGroupEntry;

typedef struct WGPUBindGroupDescriptor {
    WGPUChainedStruct *nextInChain;    /* 0x00 */
    WGPUStringView label;              /* 0x08 */
    WGPUBindGroupLayout layout;        /* 0x18 */
    size_t entryCount;                 /* 0x20 */
    const WGPUBindGroupEntry *entries; /* 0x28 */
} WGPUBindGroupDescriptor;

typedef enum WGPUQueryType { WGPUQueryType_Timestamp = 0x00000002 } WGPUQueryType;

typedef struct WGPUQuerySetDescriptor {
    WGPUChainedStruct *nextInChain; /* 0x00 */
    WGPUStringView label;           /* 0x08 */
    WGPUQueryType type;             /* 0x18 */
    uint32_t count;                 /* 0x1c */
} WGPUQuerySetDescriptor;

/* Dawn's own extension, chained into WGPUDeviceDescriptor.nextInChain: toggles by name.
 * lean uses it only to turn timestamp_quantization off when profiling (profile.c). */
#define WGPUSType_DawnTogglesDescriptor ((WGPUSType)0x0005000A)
typedef struct WGPUDawnTogglesDescriptor {
    WGPUChainedStruct chain;            /* 0x00 */
    size_t enabledToggleCount;          /* 0x10 */
    const char *const *enabledToggles;  /* 0x18 */
    size_t disabledToggleCount;         /* 0x20 */
    const char *const *disabledToggles; /* 0x28 */
} WGPUDawnTogglesDescriptor;

/* Dawn's experimental subgroup matrices (WGSL `enable chromium_experimental_subgroup_matrix;`,
 * Vulkan's cooperative matrices underneath). Not in the library's debug info: the values were
 * read from the library itself, each by name — asking a device for feature 0x50037 where it is
 * missing fails "Requested feature FeatureName::ChromiumExperimentalSubgroupMatrix is not
 * supported", chaining sType 0x5003B into wgpuAdapterGetInfo there fails "Feature
 * ChromiumExperimentalSubgroupMatrix is not available", its formatter maps component types
 * 1-4 to F32, F16, U32, I32 (this build has no U8/I8), and its SubgroupMatrixConfig and
 * AdapterPropertiesSubgroupMatrixConfigs operator== compare the offsets below
 * (tests/test_gpu_matrix.c holds the values to the library on Dawn's Null backend). Adapters
 * expose the feature only when asked for with the allow_unsafe_apis toggle (device.c). */
#define WGPUFeatureName_ChromiumExperimentalSubgroupMatrix ((WGPUFeatureName)0x00050037)
#define WGPUSType_AdapterPropertiesSubgroupMatrixConfigs ((WGPUSType)0x0005003B)
typedef enum WGPUSubgroupMatrixComponentType {
    WGPUSubgroupMatrixComponentType_F32 = 1,
    WGPUSubgroupMatrixComponentType_F16 = 2,
    WGPUSubgroupMatrixComponentType_U32 = 3,
    WGPUSubgroupMatrixComponentType_I32 = 4,
} WGPUSubgroupMatrixComponentType;

/* One multiply-accumulate shape: left (M rows, K columns) x right (K rows, N columns) + result
 * (M rows, N columns), left and right of componentType, the result of resultComponentType. */
typedef struct WGPUSubgroupMatrixConfig {
    WGPUSubgroupMatrixComponentType componentType;       /* 0x00 */
    WGPUSubgroupMatrixComponentType resultComponentType; /* 0x04 */
    uint32_t M;                                          /* 0x08 */
    uint32_t N;                                          /* 0x0c */
    uint32_t K;                                          /* 0x10 */
} WGPUSubgroupMatrixConfig;

/* Chained into WGPUAdapterInfo.nextInChain: the library fills both members (its own array,
 * freed with wgpuAdapterPropertiesSubgroupMatrixConfigsFreeMembers). */
typedef struct WGPUAdapterPropertiesSubgroupMatrixConfigs {
    WGPUChainedStruct chain;                 /* 0x00 */
    size_t configCount;                      /* 0x10 */
    const WGPUSubgroupMatrixConfig *configs; /* 0x18 */
} WGPUAdapterPropertiesSubgroupMatrixConfigs;

typedef struct WGPUCommandEncoderDescriptor {
    WGPUChainedStruct *nextInChain; /* 0x00 */
    WGPUStringView label;           /* 0x08 */
} WGPUCommandEncoderDescriptor;

typedef struct WGPUPassTimestampWrites {
    WGPUChainedStruct *nextInChain;     /* 0x00 */
    WGPUQuerySet querySet;              /* 0x08 */
    uint32_t beginningOfPassWriteIndex; /* 0x10 */
    uint32_t endOfPassWriteIndex;       /* 0x14 */
} WGPUPassTimestampWrites;

typedef struct WGPUComputePassDescriptor {
    WGPUChainedStruct *nextInChain;                 /* 0x00 */
    WGPUStringView label;                           /* 0x08 */
    const WGPUPassTimestampWrites *timestampWrites; /* 0x18 */
} WGPUComputePassDescriptor;

typedef struct WGPUCommandBufferDescriptor {
    WGPUChainedStruct *nextInChain; /* 0x00 */
    WGPUStringView label;           /* 0x08 */
} WGPUCommandBufferDescriptor;

/* WGSL language features (wgpuInstanceHasWGSLLanguageFeature); the one lean asks about */
typedef enum WGPUWGSLLanguageFeatureName {
    WGPUWGSLLanguageFeatureName_Packed4x8IntegerDotProduct = 0x00000002, /* dot4I8Packed, pack4xI8 */
} WGPUWGSLLanguageFeatureName;

/* ---- the function table: one typed pointer per library function lean calls ----
 * native.c resolves "wgpu" + each member's name (wgpuCreateInstance ...) with dlsym. */
typedef struct wgpu_api {
    WGPUInstance (*CreateInstance)(const WGPUInstanceDescriptor *desc);
    WGPUFuture (*InstanceRequestAdapter)(WGPUInstance instance, const WGPURequestAdapterOptions *options,
                                         WGPURequestAdapterCallbackInfo info);
    WGPUWaitStatus (*InstanceWaitAny)(WGPUInstance instance, size_t count, WGPUFutureWaitInfo *futures,
                                      uint64_t timeout_ns);
    void (*InstanceRelease)(WGPUInstance instance);
    WGPUBool (*InstanceHasWGSLLanguageFeature)(WGPUInstance instance, WGPUWGSLLanguageFeatureName feature); /* may be NULL */

    WGPUStatus (*AdapterGetInfo)(WGPUAdapter adapter, WGPUAdapterInfo *info);
    void (*AdapterInfoFreeMembers)(WGPUAdapterInfo info);
    WGPUStatus (*AdapterGetLimits)(WGPUAdapter adapter, WGPULimits *limits);
    WGPUBool (*AdapterHasFeature)(WGPUAdapter adapter, WGPUFeatureName feature);
    WGPUFuture (*AdapterRequestDevice)(WGPUAdapter adapter, const WGPUDeviceDescriptor *desc,
                                       WGPURequestDeviceCallbackInfo info);
    void (*AdapterRelease)(WGPUAdapter adapter);

    WGPUStatus (*DeviceGetLimits)(WGPUDevice device, WGPULimits *limits);
    WGPUBool (*DeviceHasFeature)(WGPUDevice device, WGPUFeatureName feature);
    WGPUQueue (*DeviceGetQueue)(WGPUDevice device);
    WGPUBuffer (*DeviceCreateBuffer)(WGPUDevice device, const WGPUBufferDescriptor *desc);
    WGPUShaderModule (*DeviceCreateShaderModule)(WGPUDevice device, const WGPUShaderModuleDescriptor *desc);
    WGPUComputePipeline (*DeviceCreateComputePipeline)(WGPUDevice device,
                                                       const WGPUComputePipelineDescriptor *desc);
    WGPUBindGroup (*DeviceCreateBindGroup)(WGPUDevice device, const WGPUBindGroupDescriptor *desc);
    WGPUCommandEncoder (*DeviceCreateCommandEncoder)(WGPUDevice device, const WGPUCommandEncoderDescriptor *desc);
    void (*DevicePushErrorScope)(WGPUDevice device, WGPUErrorFilter filter);
    WGPUFuture (*DevicePopErrorScope)(WGPUDevice device, WGPUPopErrorScopeCallbackInfo info);
    WGPUQuerySet (*DeviceCreateQuerySet)(WGPUDevice device, const WGPUQuerySetDescriptor *desc);
    void (*DeviceDestroy)(WGPUDevice device);
    void (*DeviceRelease)(WGPUDevice device);

    void (*QueueWriteBuffer)(WGPUQueue queue, WGPUBuffer buffer, uint64_t offset, const void *data, size_t size);
    void (*QueueSubmit)(WGPUQueue queue, size_t count, const WGPUCommandBuffer *commands);
    WGPUFuture (*QueueOnSubmittedWorkDone)(WGPUQueue queue, WGPUQueueWorkDoneCallbackInfo info);
    void (*QueueRelease)(WGPUQueue queue);

    WGPUFuture (*BufferMapAsync)(WGPUBuffer buffer, WGPUMapMode mode, size_t offset, size_t size,
                                 WGPUBufferMapCallbackInfo info);
    const void *(*BufferGetConstMappedRange)(WGPUBuffer buffer, size_t offset, size_t size);
    void (*BufferUnmap)(WGPUBuffer buffer);
    void (*BufferDestroy)(WGPUBuffer buffer);
    void (*BufferRelease)(WGPUBuffer buffer);

    void (*ShaderModuleRelease)(WGPUShaderModule module);
    WGPUBindGroupLayout (*ComputePipelineGetBindGroupLayout)(WGPUComputePipeline pipeline, uint32_t group);
    void (*ComputePipelineRelease)(WGPUComputePipeline pipeline);
    void (*BindGroupLayoutRelease)(WGPUBindGroupLayout layout);
    void (*BindGroupRelease)(WGPUBindGroup group);

    WGPUComputePassEncoder (*CommandEncoderBeginComputePass)(WGPUCommandEncoder encoder,
                                                             const WGPUComputePassDescriptor *desc);
    void (*CommandEncoderCopyBufferToBuffer)(WGPUCommandEncoder encoder, WGPUBuffer src, uint64_t src_offset,
                                             WGPUBuffer dst, uint64_t dst_offset, uint64_t size);
    void (*CommandEncoderResolveQuerySet)(WGPUCommandEncoder encoder, WGPUQuerySet set, uint32_t first,
                                          uint32_t count, WGPUBuffer dst, uint64_t dst_offset);
    WGPUCommandBuffer (*CommandEncoderFinish)(WGPUCommandEncoder encoder, const WGPUCommandBufferDescriptor *desc);
    void (*CommandEncoderRelease)(WGPUCommandEncoder encoder);
    void (*CommandBufferRelease)(WGPUCommandBuffer commands);

    void (*ComputePassEncoderSetPipeline)(WGPUComputePassEncoder pass, WGPUComputePipeline pipeline);
    void (*ComputePassEncoderSetBindGroup)(WGPUComputePassEncoder pass, uint32_t group, WGPUBindGroup bind_group,
                                           size_t dynamic_offset_count, const uint32_t *dynamic_offsets);
    void (*ComputePassEncoderDispatchWorkgroups)(WGPUComputePassEncoder pass, uint32_t x, uint32_t y, uint32_t z);
    void (*ComputePassEncoderEnd)(WGPUComputePassEncoder pass);
    void (*ComputePassEncoderRelease)(WGPUComputePassEncoder pass);

    void (*QuerySetDestroy)(WGPUQuerySet set);
    void (*QuerySetRelease)(WGPUQuerySet set);

    /* optional (NULL where the library has none): Dawn's own */
    void (*DeviceSetLoggingCallback)(WGPUDevice device, WGPULoggingCallbackInfo info);
    void (*AdapterPropertiesSubgroupMatrixConfigsFreeMembers)(
        WGPUAdapterPropertiesSubgroupMatrixConfigs configs); /* may be NULL (an older library) */
} wgpu_api;

#endif
