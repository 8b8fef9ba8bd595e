// cuBLASLt, loaded when cnnrt first calls it.
//
// Why: mapping libcublasLt.so (≈ 0.5 GB) runs its static constructors before main — 110-130 ms
// on every process that links it, measured on an empty program (docs/PERFORMANCE.md, run 34),
// and most of the 90-160 ms a `cnnrt` process spent before main.  Most engines never touch
// cuBLASLt: the batch-1 plans run the linears on cnnrt's GEMV, and a warm `cnnrt build` runs
// nothing.  So cnnrt does not link cuBLASLt; it defines here the cuBLASLt functions it calls, with
// the header's own signatures (the compiler checks each against cublasLt.h), and each forwards to
// the library's definition, looked up by dlopen/dlsym on the first call of any of them.
//
// Where the library comes from: its soname (libcublasLt.so.<major> of the headers cnnrt was built
// with) on the loader's usual path — the one the linker would have used: RUNPATH, LD_LIBRARY_PATH,
// the system's cache — else the CUDA toolkit's library folder found at configure time.  A library
// that cannot be loaded is one cnnrt::Error naming it and the loader's reason, raised by the call
// that needed it (an engine's build), never at start-up.
//
// The definitions are hidden: libcnnrt.so exports only its API (runtime/libcnnrt.map), and a
// program that links cuBLASLt itself keeps calling its own copy, which dlopen then shares (the
// same soname is loaded once per process).
#include <cublasLt.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "cnnrt/error.h"

#ifndef CNNRT_CUBLASLT_FALLBACK_DIR
#define CNNRT_CUBLASLT_FALLBACK_DIR ""
#endif

namespace {

void* cublaslt_library() {
  static void* library = nullptr;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string soname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
    library = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) return;
    failure = dlerror();
    const std::string folder = CNNRT_CUBLASLT_FALLBACK_DIR;
    if (folder.empty()) return;
    library = dlopen((folder + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) failure += "; " + std::string(dlerror());
  });
  if (library == nullptr)
    throw cnnrt::Error("cuBLASLt could not be loaded (" + failure +
                       "): the cuBLASLt kernels need the CUDA toolkit's cuBLAS libraries");
  return library;
}

// The library's definition of `name`, typed like cnnrt's declaration of it (from the header).
template <typename Function>
Function* cublaslt_symbol(Function* /*declared*/, const char* name) {
  void* symbol = dlsym(cublaslt_library(), name);
  if (symbol == nullptr)
    throw cnnrt::Error(std::string("cuBLASLt has no ") + name + " (" + dlerror() +
                       "): the library is older than the headers cnnrt was built with");
  return reinterpret_cast<Function*>(symbol);
}

}  // namespace

// One resolved pointer per function, looked up on its first call.
#define CNNRT_CUBLASLT(name, ...)                                                          \
  static auto* const real = cublaslt_symbol(static_cast<decltype(&name)>(nullptr), #name); \
  return real(__VA_ARGS__)

#define CNNRT_HIDDEN __attribute__((visibility("hidden")))

extern "C" {

CNNRT_HIDDEN const char* cublasLtGetStatusString(cublasStatus_t status) {
  try {
    CNNRT_CUBLASLT(cublasLtGetStatusString, status);
  } catch (const cnnrt::Error&) {
    return "cuBLASLt status (the library could not be loaded to name it)";
  }
}

CNNRT_HIDDEN cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  CNNRT_CUBLASLT(cublasLtCreate, handle);
}

CNNRT_HIDDEN cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  CNNRT_CUBLASLT(cublasLtDestroy, handle);
}

CNNRT_HIDDEN cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                           const void* alpha, const void* a,
                                           cublasLtMatrixLayout_t a_desc, const void* b,
                                           cublasLtMatrixLayout_t b_desc, const void* beta,
                                           const void* c, cublasLtMatrixLayout_t c_desc, void* d,
                                           cublasLtMatrixLayout_t d_desc,
                                           const cublasLtMatmulAlgo_t* algo, void* workspace,
                                           size_t workspace_bytes, cudaStream_t stream) {
  CNNRT_CUBLASLT(cublasLtMatmul, handle, desc, alpha, a, a_desc, b, b_desc, beta, c, c_desc, d,
                 d_desc, algo, workspace, workspace_bytes, stream);
}

CNNRT_HIDDEN cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a_desc,
    cublasLtMatrixLayout_t b_desc, cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
    cublasLtMatmulPreference_t preference, int requested, cublasLtMatmulHeuristicResult_t results[],
    int* returned) {
  CNNRT_CUBLASLT(cublasLtMatmulAlgoGetHeuristic, handle, desc, a_desc, b_desc, c_desc, d_desc,
                 preference, requested, results, returned);
}

CNNRT_HIDDEN cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc,
                                                     cublasComputeType_t compute,
                                                     cudaDataType_t scale) {
  CNNRT_CUBLASLT(cublasLtMatmulDescCreate, desc, compute, scale);
}

CNNRT_HIDDEN cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  CNNRT_CUBLASLT(cublasLtMatmulDescDestroy, desc);
}

CNNRT_HIDDEN cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                                           cublasLtMatmulDescAttributes_t attr,
                                                           const void* buf, size_t bytes) {
  CNNRT_CUBLASLT(cublasLtMatmulDescSetAttribute, desc, attr, buf, bytes);
}

CNNRT_HIDDEN cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  CNNRT_CUBLASLT(cublasLtMatmulPreferenceCreate, pref);
}

CNNRT_HIDDEN cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  CNNRT_CUBLASLT(cublasLtMatmulPreferenceDestroy, pref);
}

CNNRT_HIDDEN cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
    size_t bytes) {
  CNNRT_CUBLASLT(cublasLtMatmulPreferenceSetAttribute, pref, attr, buf, bytes);
}

CNNRT_HIDDEN cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout,
                                                       cudaDataType type, uint64_t rows,
                                                       uint64_t cols, int64_t ld) {
  CNNRT_CUBLASLT(cublasLtMatrixLayoutCreate, layout, type, rows, cols, ld);
}

CNNRT_HIDDEN cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  CNNRT_CUBLASLT(cublasLtMatrixLayoutDestroy, layout);
}

CNNRT_HIDDEN cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                             cublasLtMatrixLayoutAttribute_t attr,
                                                             const void* buf, size_t bytes) {
  CNNRT_CUBLASLT(cublasLtMatrixLayoutSetAttribute, layout, attr, buf, bytes);
}

CNNRT_HIDDEN cublasStatus_t cublasLtMatrixTransform(
    cublasLtHandle_t handle, cublasLtMatrixTransformDesc_t desc, const void* alpha, const void* a,
    cublasLtMatrixLayout_t a_desc, const void* beta, const void* b, cublasLtMatrixLayout_t b_desc,
    void* c, cublasLtMatrixLayout_t c_desc, cudaStream_t stream) {
  CNNRT_CUBLASLT(cublasLtMatrixTransform, handle, desc, alpha, a, a_desc, beta, b, b_desc, c,
                 c_desc, stream);
}

CNNRT_HIDDEN cublasStatus_t cublasLtMatrixTransformDescCreate(cublasLtMatrixTransformDesc_t* desc,
                                                              cudaDataType scale) {
  CNNRT_CUBLASLT(cublasLtMatrixTransformDescCreate, desc, scale);
}

CNNRT_HIDDEN cublasStatus_t cublasLtMatrixTransformDescDestroy(cublasLtMatrixTransformDesc_t desc) {
  CNNRT_CUBLASLT(cublasLtMatrixTransformDescDestroy, desc);
}

CNNRT_HIDDEN cublasStatus_t cublasLtMatrixTransformDescSetAttribute(
    cublasLtMatrixTransformDesc_t desc, cublasLtMatrixTransformDescAttributes_t attr,
    const void* buf, size_t bytes) {
  CNNRT_CUBLASLT(cublasLtMatrixTransformDescSetAttribute, desc, attr, buf, bytes);
}

}  // extern "C"
