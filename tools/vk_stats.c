/* vk_stats.c — what a Vulkan driver makes of a compute shader: builds each SPIR-V file given
 * into a compute pipeline with VK_KHR_pipeline_executable_properties' statistics captured, and
 * prints them (on NVIDIA: registers a thread, shared and local memory, spills, instruction
 * counts). Dawn does not report these; scripts/h200_vk_stats.sh feeds this the SPIR-V Dawn
 * made for lean's kernels (LEAN_GPU_DUMP=1) to see why a kernel runs below the card's peak.
 *
 *   cc -O2 -I<vulkan headers> tools/vk_stats.c -o build/vk_stats -ldl
 *   build/vk_stats FILE.spv...
 *
 * The pipeline layout comes from the module itself: every variable decorated with a
 * DescriptorSet and a Binding becomes a storage buffer (StorageBuffer class, or Uniform with
 * BufferBlock) or a uniform buffer (Uniform with Block); a push-constant variable gets 128
 * bytes. Every feature the device has is enabled, so whatever capability Dawn's output declares
 * is there. A development tool: it runs on the H200 machine, not in the tests. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

#define MAX_IDS (1u << 20)
#define MAX_BINDINGS 64

static PFN_vkGetInstanceProcAddr get_proc;

static void die(const char *what, VkResult r) {
    fprintf(stderr, "vk_stats: %s failed (VkResult %d)\n", what, (int)r);
    exit(1);
}

static uint32_t *read_spirv(const char *path, size_t *n_words) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint32_t *w = n >= 20 && n % 4 == 0 ? malloc((size_t)n) : NULL;
    const size_t got = w ? fread(w, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!w || got != (size_t)n || w[0] != 0x07230203) {
        free(w);
        return NULL;
    }
    *n_words = (size_t)n / 4;
    return w;
}

typedef struct binding {
    uint32_t set, binding;
    VkDescriptorType type;
} binding;

/* The name of the module's first compute entry point into name (Dawn may rename "main"). */
static void entry_name(const uint32_t *w, size_t n, char *name, size_t cap) {
    snprintf(name, cap, "main");
    for (size_t i = 5; i < n && (w[i] >> 16);) {
        const uint32_t len = w[i] >> 16, op = w[i] & 0xffff;
        if (op == 15 && len >= 4 && w[i + 1] == 5 && i + len <= n) { /* OpEntryPoint GLCompute id "name" */
            const char *s = (const char *)&w[i + 3];
            snprintf(name, cap, "%.*s", (int)strnlen(s, (len - 3) * 4), s);
            return;
        }
        i += len;
    }
}

/* The descriptors and push constants the module uses (see the top of the file). */
static int module_bindings(const uint32_t *w, size_t n, binding *out, int *n_out, int *push) {
    static uint32_t set_of[MAX_IDS], bind_of[MAX_IDS], block_of[MAX_IDS], ptr_type[MAX_IDS];
    memset(set_of, 0xff, sizeof set_of), memset(bind_of, 0xff, sizeof bind_of);
    memset(block_of, 0, sizeof block_of);
    *n_out = 0, *push = 0;
    for (size_t i = 5; i < n;) { /* pass 1: decorations and pointer types */
        const uint32_t len = w[i] >> 16, op = w[i] & 0xffff;
        if (len == 0 || i + len > n) return -1;
        if (op == 71 && len >= 3 && w[i + 1] < MAX_IDS) { /* OpDecorate id decoration [literal] */
            const uint32_t id = w[i + 1], dec = w[i + 2];
            if (dec == 34 && len >= 4) set_of[id] = w[i + 3];  /* DescriptorSet */
            if (dec == 33 && len >= 4) bind_of[id] = w[i + 3]; /* Binding */
            if (dec == 2 || dec == 3) block_of[id] = dec;      /* Block, BufferBlock */
        }
        if (op == 32 && len == 4 && w[i + 1] < MAX_IDS) ptr_type[w[i + 1]] = w[i + 3]; /* OpTypePointer id class type */
        i += len;
    }
    for (size_t i = 5; i < n; i += w[i] >> 16) { /* pass 2: the variables */
        const uint32_t len = w[i] >> 16, op = w[i] & 0xffff;
        if (op != 59 || len < 4 || w[i + 1] >= MAX_IDS || w[i + 2] >= MAX_IDS) continue; /* OpVariable */
        const uint32_t type = w[i + 1], id = w[i + 2], cls = w[i + 3];
        if (cls == 9) *push = 1; /* PushConstant */
        if (set_of[id] == 0xffffffffu || bind_of[id] == 0xffffffffu || *n_out == MAX_BINDINGS) continue;
        const uint32_t pointee = ptr_type[type] < MAX_IDS ? ptr_type[type] : 0;
        VkDescriptorType t = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        if (cls == 2 && block_of[pointee] == 2) t = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER; /* Uniform, Block */
        else if (cls != 12 && cls != 2) continue; /* not a buffer: images and samplers are not ours */
        out[(*n_out)++] = (binding){set_of[id], bind_of[id], t};
    }
    return 0;
}

#define LOAD(inst, name) PFN_##name name = (PFN_##name)get_proc(inst, #name)
#define DLOAD(dev, name) PFN_##name name = (PFN_##name)vkGetDeviceProcAddr(dev, #name)

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: vk_stats FILE.spv...\n");
        return 2;
    }
    void *lib = dlopen("libvulkan.so.1", RTLD_NOW);
    if (!lib || !(get_proc = (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr"))) {
        fprintf(stderr, "vk_stats: no Vulkan loader (libvulkan.so.1)\n");
        return 1;
    }
    LOAD(NULL, vkCreateInstance);
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_3};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance inst;
    VkResult r = vkCreateInstance(&ici, NULL, &inst);
    if (r) die("vkCreateInstance", r);
    LOAD(inst, vkEnumeratePhysicalDevices);
    LOAD(inst, vkGetPhysicalDeviceProperties);
    LOAD(inst, vkGetPhysicalDeviceFeatures2);
    LOAD(inst, vkCreateDevice);
    LOAD(inst, vkGetDeviceProcAddr);
    uint32_t n_pd = 8;
    VkPhysicalDevice pds[8];
    if ((r = vkEnumeratePhysicalDevices(inst, &n_pd, pds)) < 0 || n_pd == 0) die("vkEnumeratePhysicalDevices", r);
    VkPhysicalDevice pd = pds[0];
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    printf("device: %s\n", props.deviceName);

    /* every feature the device has, pipeline statistics among them */
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pe = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
    VkPhysicalDeviceVulkan13Features f13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, .pNext = &pe};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &f13};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12};
    VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
    vkGetPhysicalDeviceFeatures2(pd, &f);
    /* without statistics the pipelines are still built (the modules and layouts checked) */
    const int stats = pe.pipelineExecutableInfo != 0;
    if (!stats) fprintf(stderr, "vk_stats: %s gives no pipeline statistics\n", props.deviceName);
    const float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueCount = 1,
                                   .pQueuePriorities = &prio};
    const char *ext[] = {"VK_KHR_pipeline_executable_properties"};
    if (!stats) f13.pNext = NULL;
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &f, .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci, .enabledExtensionCount = (uint32_t)stats,
                              .ppEnabledExtensionNames = ext};
    VkDevice dev;
    if ((r = vkCreateDevice(pd, &dci, NULL, &dev))) die("vkCreateDevice", r);
    DLOAD(dev, vkCreateShaderModule);
    DLOAD(dev, vkCreateDescriptorSetLayout);
    DLOAD(dev, vkCreatePipelineLayout);
    DLOAD(dev, vkCreateComputePipelines);
    DLOAD(dev, vkGetPipelineExecutablePropertiesKHR);
    DLOAD(dev, vkGetPipelineExecutableStatisticsKHR);

    int failed = 0;
    for (int a = 1; a < argc; a++) {
        size_t n = 0;
        uint32_t *code = read_spirv(argv[a], &n);
        binding b[MAX_BINDINGS];
        int nb = 0, push = 0;
        if (!code || module_bindings(code, n, b, &nb, &push)) {
            fprintf(stderr, "vk_stats: %s: not a SPIR-V module\n", argv[a]);
            failed = 1;
            free(code);
            continue;
        }
        uint32_t n_sets = 0;
        for (int i = 0; i < nb; i++) n_sets = b[i].set + 1 > n_sets ? b[i].set + 1 : n_sets;
        if (n_sets > 4) n_sets = 4; /* Dawn uses groups 0-3 */
        VkDescriptorSetLayout layouts[4];
        for (uint32_t s = 0; s < n_sets; s++) {
            VkDescriptorSetLayoutBinding lb[MAX_BINDINGS];
            uint32_t k = 0;
            for (int i = 0; i < nb; i++)
                if (b[i].set == s)
                    lb[k++] = (VkDescriptorSetLayoutBinding){b[i].binding, b[i].type, 1, VK_SHADER_STAGE_COMPUTE_BIT, NULL};
            VkDescriptorSetLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                                   .bindingCount = k, .pBindings = lb};
            if ((r = vkCreateDescriptorSetLayout(dev, &lci, NULL, &layouts[s]))) die("vkCreateDescriptorSetLayout", r);
        }
        VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 128};
        VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                           .setLayoutCount = n_sets, .pSetLayouts = layouts,
                                           .pushConstantRangeCount = push ? 1 : 0, .pPushConstantRanges = &pcr};
        VkPipelineLayout pl;
        if ((r = vkCreatePipelineLayout(dev, &plci, NULL, &pl))) die("vkCreatePipelineLayout", r);
        VkShaderModuleCreateInfo smci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = n * 4,
                                         .pCode = code};
        VkShaderModule sm;
        if ((r = vkCreateShaderModule(dev, &smci, NULL, &sm))) die("vkCreateShaderModule", r);
        char entry[128];
        entry_name(code, n, entry, sizeof entry);
        VkComputePipelineCreateInfo cci = {
            .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            .flags = stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0,
            .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                      .module = sm, .pName = entry},
            .layout = pl};
        VkPipeline p;
        if ((r = vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cci, NULL, &p))) {
            fprintf(stderr, "vk_stats: %s: vkCreateComputePipelines failed (VkResult %d)\n", argv[a], (int)r);
            failed = 1;
            free(code);
            continue;
        }
        if (!stats) {
            printf("%s: built\n", argv[a]);
            free(code);
            continue;
        }
        VkPipelineInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = p};
        VkPipelineExecutablePropertiesKHR ep[8];
        uint32_t n_ep = 8;
        for (uint32_t i = 0; i < 8; i++) ep[i] = (VkPipelineExecutablePropertiesKHR){
                                             .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR};
        if ((r = vkGetPipelineExecutablePropertiesKHR(dev, &pi, &n_ep, ep)) < 0) die("executable properties", r);
        for (uint32_t e = 0; e < n_ep; e++) {
            printf("%s: %s (subgroup %u):", argv[a], ep[e].name, ep[e].subgroupSize);
            VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, .pipeline = p,
                                              .executableIndex = e};
            VkPipelineExecutableStatisticKHR st[64];
            uint32_t n_st = 64;
            for (uint32_t i = 0; i < 64; i++)
                st[i] = (VkPipelineExecutableStatisticKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
            if ((r = vkGetPipelineExecutableStatisticsKHR(dev, &ei, &n_st, st)) < 0) die("executable statistics", r);
            for (uint32_t i = 0; i < n_st; i++) {
                printf(" %s=", st[i].name);
                switch (st[i].format) {
                case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: printf("%u", st[i].value.b32); break;
                case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: printf("%lld", (long long)st[i].value.i64); break;
                case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
                    printf("%llu", (unsigned long long)st[i].value.u64);
                    break;
                default: printf("%g", st[i].value.f64); break;
                }
            }
            printf("\n");
        }
        free(code);
    }
    return failed || !stats;
}
