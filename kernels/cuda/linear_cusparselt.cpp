// cuSPARSELt 2:4 fp16 linear: what the vendor library does with the project's sparse GEMMs.
//
// Design: the problem is the fp16 linear's (kernels/cuda/linear_fp16.h), D = W · Xᵀ with
//   A = W   [rows = pad8(out)][cols = pad8(in)] row-major, op N: the structured (2:4) operand.
//           cuSPARSELt groups a structured operand along the K of the product, i.e. along the
//           columns of op(A) = A: 4 consecutive input features, as docs/SPARSITY.md defines the
//           groups (PyTorch's cuSPARSELt path describes a linear weight the same way);
//   B = x   [n][cols] row-major (ld = cols), op T: op(B) = Xᵀ, cols × n;
//   C = D   y [n][rows] read as a rows × n column-major matrix (ld = rows), bias [rows] fp16 and
//           ReLU in cuSPARSELt's epilogue (the bias runs along D's rows, the output features),
//           fp32 compute; C and D are the same buffer (beta = 0: C is not read);
// the same bytes as the cuBLASLt GEMM of linear_fp16.cu, so the two time the same product.  The
// padding rows and columns of W and the padding entries of the bias are zeros, so the padding
// lanes of y come out zero like every other kernel's.
//
// At build: the dense weight is checked 2:4 in PyTorch's order (graph/passes_sparsity.h, an
// Error naming the group), rounded to fp16, checked once more by cuSPARSELt in its own grouping
// (cusparseLtSpMMAPruneCheck on the matmul descriptor of a small probe product with the weight's
// descriptor and op: the check the library documents for a matmul; its d_valid flag is zeroed
// first, as nothing documents that the check writes it when the weight passes), then compressed
// (cusparseLtSpMMACompress2, which needs only the structured descriptor, so one compressed copy
// serves every batch's plan) and the dense copy freed.  When cuSPARSELt's check disagrees with
// ours, cuSPARSELt's own strip pruning (cusparseLtSpMMAPrune) is run on a copy and compared with
// the weight, and the Error says how many values, and which first, it would change: a
// descriptor that groups along the wrong axis shows there.  plan(batch), once per context: the
// B and D descriptors, the matmul descriptor with its epilogue, cuSPARSELt's default algorithm
// (cusparseLtMatmulSearch launches and times kernels, so it cannot run in a context's prepare();
// the kernel lab runs it through search(), or sweeps the configurations through plan()'s
// config_id), the plan and its workspace.  run() only enqueues.
//
// Staging (in the workspace, before cuSPARSELt's own part):
//   - cuSPARSELt's dense matrices take row and column counts that are multiples of 8 (fp16),
//     and the backend's buffers hold exactly `batch` rows: a batch that is not a multiple of 8
//     is copied into an x buffer of round_up8(batch) rows, computed into a y buffer of as many,
//     and its first `batch` rows copied out.  Rows past the batch are never zeroed: column j of
//     D reads only row j of B, so they cannot reach the real rows.
//   - A layer that reads an NHWC flatten gets its features in (h, w, c) order (cuda_registry.h),
//     which would break 2:4 groups made in PyTorch's (c, h, w) order; permuting the weight
//     instead (as the dense linears do) would make it not 2:4.  So x is transposed back per
//     sample ([H·W][C] → [C][H·W], cublasLtMatrixTransform, batched) into the x buffer, whose
//     padding columns are zeroed first.
//
// One cuSPARSELt handle per layer, and a cuBLASLt one for the transpose; plans hold a reference
// to them, so a context's plan stays valid whatever is destroyed first.  cusparseLtMatmul gets
// its stream per call (the handle is not mutated); the calls are serialised per layer all the
// same, because the library does not document concurrent use of one handle and plan.
#ifdef CNNRT_WITH_CUSPARSELT

#include "kernels/cuda/linear_cusparselt.h"

#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cusparseLt.h>

#include <mutex>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "graph/passes_sparsity.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/linear_pack.h"

namespace cnnrt::cuda {
namespace {

[[noreturn]] void throw_cusparselt_error(const char* call, cusparseStatus_t status,
                                         const char* file, int line) {
  const std::string detail =
      std::string(cusparseLtGetErrorName(status)) + " (" + cusparseLtGetErrorString(status) + ")";
  throw_cuda_error(call, detail.c_str(), file, line);
}

}  // namespace
}  // namespace cnnrt::cuda

#define CNNRT_CUSPARSELT_CHECK(call)                                                   \
  do {                                                                                 \
    cusparseStatus_t cnnrt_status_ = (call);                                           \
    if (cnnrt_status_ != CUSPARSE_STATUS_SUCCESS)                                      \
      ::cnnrt::cuda::throw_cusparselt_error(#call, cnnrt_status_, __FILE__, __LINE__); \
  } while (0)

namespace cnnrt::cuda {
namespace {

constexpr uint32_t kAlignment = 16;  // bytes; every pointer handed to cuSPARSELt is 256-aligned
constexpr cudaDataType kHalf = CUDA_R_16F;
constexpr cusparseOperation_t kNoTranspose = CUSPARSE_OPERATION_NON_TRANSPOSE;
constexpr cusparseOperation_t kTranspose = CUSPARSE_OPERATION_TRANSPOSE;
constexpr int64_t kProbeColumns = 16;  // n of the product the constructor's check describes

size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// An int attribute of an algorithm selection, or -1 where cuSPARSELt does not give it: for what
// is only reported (configuration numbers), never for what a plan depends on.
int alg_attribute_or_minus_one(const cusparseLtHandle_t* handle,
                               const cusparseLtMatmulAlgSelection_t* algorithm,
                               cusparseLtMatmulAlgAttribute_t attribute) {
  int value = -1;
  if (cusparseLtMatmulAlgGetAttribute(handle, algorithm, attribute, &value, sizeof(value)) !=
      CUSPARSE_STATUS_SUCCESS)
    return -1;
  return value;
}

// The library state a layer and its plans share: the handles and the weight's descriptor.
struct Libraries {
  cusparseLtHandle_t handle{};
  cusparseLtMatDescriptor_t weight_desc{};
  bool handle_ready = false, weight_desc_ready = false;
  cublasLtHandle_t lt = nullptr;                           // flattened input only
  cublasLtMatrixTransformDesc_t transpose_desc = nullptr;  // flattened input only
  std::mutex mutex;  // around cusparseLtMatmul / Search (see the note)

  Libraries() = default;
  Libraries(const Libraries&) = delete;
  Libraries& operator=(const Libraries&) = delete;
  ~Libraries() {  // destructor: nothing useful to do with an error
    if (transpose_desc != nullptr) cublasLtMatrixTransformDescDestroy(transpose_desc);
    if (lt != nullptr) cublasLtDestroy(lt);
    if (weight_desc_ready) cusparseLtMatDescriptorDestroy(&weight_desc);
    if (handle_ready) cusparseLtDestroy(&handle);
  }
};

}  // namespace

struct LinearCusparseLt::Plan {
  std::shared_ptr<Libraries> libs;  // null when planned for a described target
  int64_t batch = 0, n = 0;         // n: the columns cuSPARSELt computes (>= batch)
  bool stage_x = false, stage_y = false;
  size_t x_bytes = 0, y_bytes = 0;   // staging buffers at the start of the workspace
  mutable size_t library_bytes = 0;  // cuSPARSELt's workspace (search() may change it)
  cusparseLtMatDescriptor_t b_desc{}, d_desc{};
  cusparseLtMatmulDescriptor_t matmul{};
  // The plan refers to the selection; search() updates both (mutable: a searched plan).
  mutable cusparseLtMatmulAlgSelection_t algorithm{};
  mutable cusparseLtMatmulPlan_t plan{};  // mutable: search() keeps the fastest configuration
  bool b_ready = false, d_ready = false, algorithm_ready = false, plan_ready = false;
  cublasLtMatrixLayout_t from_layout = nullptr, to_layout = nullptr;  // the transpose's

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (plan_ready) cusparseLtMatmulPlanDestroy(&plan);
    if (algorithm_ready) cusparseLtMatmulAlgSelectionDestroy(&algorithm);
    if (d_ready) cusparseLtMatDescriptorDestroy(&d_desc);
    if (b_ready) cusparseLtMatDescriptorDestroy(&b_desc);
    if (to_layout != nullptr) cublasLtMatrixLayoutDestroy(to_layout);
    if (from_layout != nullptr) cublasLtMatrixLayoutDestroy(from_layout);
  }
};

struct LinearCusparseLt::Impl {
  int out = 0, in = 0;
  int rows = 0, cols = 0;  // pad8(out), pad8(in)
  bool relu = false;
  Shape flattened;  // [C, H, W] or {}
  // Built while planning for a described target (device_traits.h): nothing on the device.
  bool plan_only = false;
  std::shared_ptr<Libraries> libs;
  DeviceArray compressed, bias;

  // B's and D's descriptors for p.n columns and the matmul descriptor of the product with its
  // epilogue (the note).
  void describe(Plan& p) const {
    const cusparseLtHandle_t* handle = &libs->handle;
    CNNRT_CUSPARSELT_CHECK(cusparseLtDenseDescriptorInit(handle, &p.b_desc, p.n, cols,
                                                         /*ld=*/cols, kAlignment, kHalf,
                                                         CUSPARSE_ORDER_ROW));
    p.b_ready = true;
    CNNRT_CUSPARSELT_CHECK(cusparseLtDenseDescriptorInit(handle, &p.d_desc, rows, p.n,
                                                         /*ld=*/rows, kAlignment, kHalf,
                                                         CUSPARSE_ORDER_COL));
    p.d_ready = true;
    CNNRT_CUSPARSELT_CHECK(cusparseLtMatmulDescriptorInit(
        handle, &p.matmul, kNoTranspose, kTranspose, &libs->weight_desc, &p.b_desc, &p.d_desc,
        &p.d_desc, CUSPARSE_COMPUTE_32F));
    if (relu) {
      const int on = 1;
      CNNRT_CUSPARSELT_CHECK(cusparseLtMatmulDescSetAttribute(
          handle, &p.matmul, CUSPARSELT_MATMUL_ACTIVATION_RELU, &on, sizeof(on)));
    }
    const void* bias_pointer = bias.get();
    CNNRT_CUSPARSELT_CHECK(cusparseLtMatmulDescSetAttribute(
        handle, &p.matmul, CUSPARSELT_MATMUL_BIAS_POINTER, &bias_pointer, sizeof(bias_pointer)));
  }

  // cuSPARSELt's verdict on the fp16 weight `dense` (rows × cols on the device) in its own
  // grouping; throws the Error the constructor documents when it is not 2:4 there.
  void check_structure(const void* dense) const {
    const cusparseLtHandle_t* handle = &libs->handle;
    Plan probe;
    probe.n = kProbeColumns;
    describe(probe);
    DeviceArray valid(sizeof(int));
    CNNRT_CUDA_CHECK(cudaMemsetAsync(valid.get(), 0, sizeof(int), nullptr));
    CNNRT_CUSPARSELT_CHECK(cusparseLtSpMMAPruneCheck(handle, &probe.matmul, dense,
                                                     static_cast<int*>(valid.get()), nullptr));
    int flag = 0;
    CNNRT_CUDA_CHECK(cudaMemcpy(&flag, valid.get(), sizeof(int), cudaMemcpyDeviceToHost));
    if (flag == 0) return;

    // Where would cuSPARSELt's own 2-of-4 strip pruning change the weight?
    const size_t count = static_cast<size_t>(rows) * cols;
    DeviceArray pruned(count * sizeof(__half));
    CNNRT_CUSPARSELT_CHECK(cusparseLtSpMMAPrune(handle, &probe.matmul, dense, pruned.get(),
                                                CUSPARSELT_PRUNE_SPMMA_STRIP, nullptr));
    std::vector<__half> before(count), after(count);
    CNNRT_CUDA_CHECK(
        cudaMemcpy(before.data(), dense, count * sizeof(__half), cudaMemcpyDeviceToHost));
    CNNRT_CUDA_CHECK(
        cudaMemcpy(after.data(), pruned.get(), count * sizeof(__half), cudaMemcpyDeviceToHost));
    size_t changed = 0, first = 0;
    for (size_t i = 0; i < count; ++i)
      if (__half2float(before[i]) != __half2float(after[i]) && changed++ == 0) first = i;
    const std::string prefix =
        "linear_cusparselt: cuSPARSELt's check (cusparseLtSpMMAPruneCheck, d_valid " +
        std::to_string(flag) +
        ") finds the fp16 weight not 2:4 in its grouping, though every group of 4 input "
        "features holds at most 2 non-zeros; ";
    if (changed == 0)
      throw Error(prefix +
                  "yet its own strip pruning (cusparseLtSpMMAPrune) leaves every value as it "
                  "is: the library contradicts itself, nothing compressed");
    throw Error(prefix + "its own strip pruning (cusparseLtSpMMAPrune) would change " +
                std::to_string(changed) + " of the " + std::to_string(count) +
                " values, the first at output " + std::to_string(first / cols) + ", input " +
                std::to_string(first % cols) +
                ": the structured descriptor (row-major, op N) does not group along the input "
                "features in this cuSPARSELt");
  }

  // The staging buffers of the plan of `batch` rows (the note), in front of cuSPARSELt's own
  // workspace.
  void staging(Plan& p, bool padded) const {
    p.n = round_up8(p.batch);
    p.stage_y = !padded && p.n != p.batch;
    p.stage_x = p.stage_y || !flattened.empty();
    p.x_bytes = p.stage_x ? align256(static_cast<size_t>(p.n) * cols * sizeof(__half)) : 0;
    p.y_bytes = p.stage_y ? align256(static_cast<size_t>(p.n) * rows * sizeof(__half)) : 0;
  }

  // Enqueues what comes before cuSPARSELt (the copy or transpose into the x buffer) and
  // returns the B and D pointers cuSPARSELt works on.
  void stage_in(const Plan& p, const void* x, void* y, char* workspace, const void** b, void** d,
                cudaStream_t stream) const {
    *b = p.stage_x ? static_cast<const void*>(workspace) : x;
    *d = p.stage_y ? static_cast<void*>(workspace + p.x_bytes) : y;
    if (!p.stage_x) return;
    const size_t row_bytes = static_cast<size_t>(cols) * sizeof(__half);
    if (flattened.empty()) {
      CNNRT_CUDA_CHECK(cudaMemcpyAsync(workspace, x, static_cast<size_t>(p.batch) * row_bytes,
                                       cudaMemcpyDeviceToDevice, stream));
      return;
    }
    if (cols > in)  // the weight's padding columns are zero, but 0 · NaN is not
      CNNRT_CUDA_CHECK(cudaMemset2DAsync(workspace + static_cast<size_t>(in) * sizeof(__half),
                                         row_bytes, 0, (cols - in) * sizeof(__half), p.batch,
                                         stream));
    const float one = 1.0f, zero = 0.0f;
    CNNRT_CUBLAS_CHECK(cublasLtMatrixTransform(libs->lt, libs->transpose_desc, &one, x,
                                               p.from_layout, &zero, nullptr, nullptr, workspace,
                                               p.to_layout, stream));
  }
};

bool LinearCusparseLt::supports(int in_features, int out_features) {
  return in_features > 0 && out_features > 0 && round_up8(in_features) % 16 == 0 &&
         round_up8(out_features) % 16 == 0;
}

std::string LinearCusparseLt::library_version() {
  int major = 0, minor = 0, patch = 0;
  CNNRT_CUSPARSELT_CHECK(cusparseLtGetProperty(MAJOR_VERSION, &major));
  CNNRT_CUSPARSELT_CHECK(cusparseLtGetProperty(MINOR_VERSION, &minor));
  CNNRT_CUSPARSELT_CHECK(cusparseLtGetProperty(PATCH_LEVEL, &patch));
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

LinearCusparseLt::LinearCusparseLt(const float* weight, const float* bias, int out_features,
                                   int in_features, bool relu, const Shape& flattened_source)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  if (!supports(in_features, out_features))
    throw Error(
        "linear_cusparselt: cuSPARSELt's fp16 structured matrix needs pad8(in) and "
        "pad8(out) to be multiples of 16, got in " +
        std::to_string(in_features) + ", out " + std::to_string(out_features));
  if (!flattened_source.empty() &&
      (flattened_source.size() != 3 || shape_elements(flattened_source) != in_features))
    throw Error("linear_cusparselt: the flattened input " + shape_to_string(flattened_source) +
                " does not have " + std::to_string(in_features) + " features");
  s.out = out_features;
  s.in = in_features;
  s.rows = static_cast<int>(round_up8(out_features));
  s.cols = static_cast<int>(round_up8(in_features));
  s.relu = relu;
  s.flattened = flattened_source;
  const std::string violation =
      sparsity::first_violation(weight, sparsity::WeightShape{out_features, in_features, 1});
  if (!violation.empty())
    throw Error("linear_cusparselt: the weight is not 2:4 along its input features: " + violation);
  // Not permuted (Shape{}): a flattened input is transposed back to PyTorch's order instead.
  const HostGemmWeights host =
      pack_linear_weights(weight, bias, out_features, in_features, Shape{});
  s.bias = upload_as_fp16(host.bias);  // the epilogue reads the bias in the output type
  s.plan_only = plan_only();
  if (s.plan_only) return;

  s.libs = std::make_shared<Libraries>();
  Libraries& lib = *s.libs;
  CNNRT_CUSPARSELT_CHECK(cusparseLtInit(&lib.handle));
  lib.handle_ready = true;
  CNNRT_CUSPARSELT_CHECK(cusparseLtStructuredDescriptorInit(
      &lib.handle, &lib.weight_desc, s.rows, s.cols, /*ld=*/s.cols, kAlignment, kHalf,
      CUSPARSE_ORDER_ROW, CUSPARSELT_SPARSITY_50_PERCENT));
  lib.weight_desc_ready = true;

  DeviceArray dense = upload_as_fp16(host.weight.data(), host.weight.size());
  // A second opinion in cuSPARSELt's own grouping: a wrong operand order here would compress a
  // weight that is not 2:4 for the library into silently wrong results.
  s.check_structure(dense.get());
  size_t compressed_bytes = 0, buffer_bytes = 0;
  CNNRT_CUSPARSELT_CHECK(cusparseLtSpMMACompressedSize2(&lib.handle, &lib.weight_desc,
                                                        &compressed_bytes, &buffer_bytes));
  s.compressed = DeviceArray(compressed_bytes);
  DeviceArray buffer(buffer_bytes);
  CNNRT_CUSPARSELT_CHECK(cusparseLtSpMMACompress2(&lib.handle, &lib.weight_desc, /*isSparseA=*/1,
                                                  kNoTranspose, dense.get(), s.compressed.get(),
                                                  buffer.get(), nullptr));
  CNNRT_CUDA_CHECK(cudaStreamSynchronize(nullptr));  // before `dense` and `buffer` are freed

  if (!s.flattened.empty()) {
    CNNRT_CUBLAS_CHECK(cublasLtCreate(&lib.lt));
    CNNRT_CUBLAS_CHECK(cublasLtMatrixTransformDescCreate(&lib.transpose_desc, CUDA_R_32F));
    const cublasOperation_t transpose = CUBLAS_OP_T;
    CNNRT_CUBLAS_CHECK(cublasLtMatrixTransformDescSetAttribute(
        lib.transpose_desc, CUBLASLT_MATRIX_TRANSFORM_DESC_TRANSA, &transpose, sizeof(transpose)));
  }
}

LinearCusparseLt::~LinearCusparseLt() = default;

LinearCusparseLt::Prepared LinearCusparseLt::plan(int64_t batch, bool buffers_hold_padded_batch,
                                                  int config_id) const {
  const Impl& s = *impl_;
  auto p = std::make_shared<Plan>();
  p->batch = batch;
  s.staging(*p, buffers_hold_padded_batch);
  Prepared prepared;
  prepared.name = s.flattened.empty() ? "cusparselt" : "transpose+cusparselt";
  if (p->stage_y) prepared.name += " (batch staged to " + std::to_string(p->n) + ")";
  if (batch > 0 && !s.plan_only) {
    p->libs = s.libs;
    const cusparseLtHandle_t* handle = &s.libs->handle;
    s.describe(*p);
    CNNRT_CUSPARSELT_CHECK(cusparseLtMatmulAlgSelectionInit(handle, &p->algorithm, &p->matmul,
                                                            CUSPARSELT_MATMUL_ALG_DEFAULT));
    p->algorithm_ready = true;
    // Reported only (the default plan does not depend on them), so not fatal for the entry.
    prepared.max_config_id =
        alg_attribute_or_minus_one(handle, &p->algorithm, CUSPARSELT_MATMUL_ALG_CONFIG_MAX_ID);
    if (config_id >= 0) {
      if (config_id > prepared.max_config_id)
        throw Error("linear_cusparselt: algorithm configuration " + std::to_string(config_id) +
                    " requested, cuSPARSELt offers 0.." + std::to_string(prepared.max_config_id) +
                    " for this product");
      CNNRT_CUSPARSELT_CHECK(cusparseLtMatmulAlgSetAttribute(
          handle, &p->algorithm, CUSPARSELT_MATMUL_ALG_CONFIG_ID, &config_id, sizeof(config_id)));
    }
    prepared.config_id =
        alg_attribute_or_minus_one(handle, &p->algorithm, CUSPARSELT_MATMUL_ALG_CONFIG_ID);
    CNNRT_CUSPARSELT_CHECK(cusparseLtMatmulPlanInit(handle, &p->plan, &p->matmul, &p->algorithm));
    p->plan_ready = true;
    CNNRT_CUSPARSELT_CHECK(cusparseLtMatmulGetWorkspace(handle, &p->plan, &p->library_bytes));
    if (!s.flattened.empty()) {
      // Per sample: [H·W][C] (a C × H·W column-major matrix) → [C][H·W] (H·W × C), both with
      // the sample stride of the padded rows.
      const uint64_t channels = s.flattened[0], pixels = s.flattened[1] * s.flattened[2];
      const int32_t count = static_cast<int32_t>(batch);
      const int64_t stride = s.cols;
      CNNRT_CUBLAS_CHECK(
          cublasLtMatrixLayoutCreate(&p->from_layout, kHalf, channels, pixels, channels));
      CNNRT_CUBLAS_CHECK(
          cublasLtMatrixLayoutCreate(&p->to_layout, kHalf, pixels, channels, pixels));
      for (cublasLtMatrixLayout_t layout : {p->from_layout, p->to_layout}) {
        CNNRT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
            layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
        CNNRT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
            layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
      }
    }
  }
  prepared.workspace_bytes = p->x_bytes + p->y_bytes + p->library_bytes;
  prepared.plan = std::move(p);
  return prepared;
}

void LinearCusparseLt::run(const Plan& p, const void* x, void* y, void* workspace,
                           cudaStream_t stream) const {
  const Impl& s = *impl_;
  if (p.batch == 0) return;
  if (p.libs == nullptr)
    throw Error("linear_cusparselt: an engine planned for a described target cannot run");
  if (workspace == nullptr && p.x_bytes + p.y_bytes + p.library_bytes > 0)
    throw Error("linear_cusparselt: run without its workspace");
  char* ws = static_cast<char*>(workspace);
  const void* b = nullptr;
  void* d = nullptr;
  s.stage_in(p, x, y, ws, &b, &d, stream);
  void* library_ws = p.library_bytes > 0 ? ws + p.x_bytes + p.y_bytes : nullptr;
  const float alpha = 1.0f, beta = 0.0f;
  cudaStream_t streams[1] = {stream};
  {
    std::lock_guard<std::mutex> lock(p.libs->mutex);
    CNNRT_CUSPARSELT_CHECK(cusparseLtMatmul(&p.libs->handle, &p.plan, &alpha, s.compressed.get(), b,
                                            &beta, d, d, library_ws, streams, 1));
  }
  if (p.stage_y)
    CNNRT_CUDA_CHECK(cudaMemcpyAsync(y, d, static_cast<size_t>(p.batch) * s.rows * sizeof(__half),
                                     cudaMemcpyDeviceToDevice, stream));
}

LinearCusparseLt::SearchResult LinearCusparseLt::search(const Prepared& prepared, const void* x,
                                                        void* y, void* workspace,
                                                        size_t workspace_bytes,
                                                        cudaStream_t stream) const {
  const Impl& s = *impl_;
  const Plan& p = *prepared.plan;
  SearchResult result;
  result.workspace_bytes = prepared.workspace_bytes;
  result.config_id = prepared.config_id;
  if (p.batch == 0 || p.libs == nullptr) return result;
  if (workspace_bytes < prepared.workspace_bytes || (workspace == nullptr && workspace_bytes > 0))
    throw Error("linear_cusparselt: search with " + std::to_string(workspace_bytes) +
                " workspace bytes, the plan needs " + std::to_string(prepared.workspace_bytes));
  char* ws = static_cast<char*>(workspace);
  const void* b = nullptr;
  void* d = nullptr;
  s.stage_in(p, x, y, ws, &b, &d, stream);
  const size_t staging = p.x_bytes + p.y_bytes;
  void* library_ws = workspace_bytes > staging ? ws + staging : nullptr;
  const float alpha = 1.0f, beta = 0.0f;
  cudaStream_t streams[1] = {stream};
  const cusparseLtHandle_t* handle = &p.libs->handle;
  std::lock_guard<std::mutex> lock(p.libs->mutex);
  CNNRT_CUSPARSELT_CHECK(cusparseLtMatmulSearch(handle, &p.plan, &alpha, s.compressed.get(), b,
                                                &beta, d, d, library_ws, streams, 1));
  CNNRT_CUDA_CHECK(cudaStreamSynchronize(stream));
  CNNRT_CUSPARSELT_CHECK(cusparseLtMatmulGetWorkspace(handle, &p.plan, &p.library_bytes));
  result.config_id =
      alg_attribute_or_minus_one(handle, &p.algorithm, CUSPARSELT_MATMUL_ALG_CONFIG_ID);
  result.split_k = alg_attribute_or_minus_one(handle, &p.algorithm, CUSPARSELT_MATMUL_SPLIT_K);
  result.workspace_bytes = staging + p.library_bytes;
  return result;
}

size_t LinearCusparseLt::weight_bytes() const {
  const Impl& s = *impl_;
  if (s.plan_only)  // an estimate: half the values, and 2 bits of metadata per kept value
    return static_cast<size_t>(s.rows) * s.cols * sizeof(__half) / 2 +
           static_cast<size_t>(s.rows) * s.cols / 8 + s.bias.bytes();
  return s.compressed.bytes() + s.bias.bytes();
}

}  // namespace cnnrt::cuda

#endif  // CNNRT_WITH_CUSPARSELT
