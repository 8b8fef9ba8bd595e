// The builder: fused graph → Engine.  Per layer it asks the kernel registry for the candidates
// on the chosen device and precision and picks one (explicit override, else the default
// heuristic: the highest-priority non-baseline kernel), then creates it, which prepacks the
// layer's weights once.  It also states the activation tensors the memory planner lays out.
#include <algorithm>
#include <map>
#include <set>

#include "graph/model_loader.h"
#include "graph/ops.h"
#include "graph/passes.h"
#include "runtime/engine_impl.h"

namespace cnnrt {
namespace {

Device resolve_device(Device requested) {
  if (requested == Device::Auto) return cuda_available() ? Device::CUDA : Device::CPU;
  if (requested == Device::CUDA) {
#ifndef CNNRT_WITH_CUDA
    throw Error(
        "device cuda: this build of cnnrt has no CUDA backend (nvcc was not found at "
        "build time); use --device cpu");
#else
    if (!cuda_available())
      throw Error("device cuda: no usable CUDA device found; use --device cpu");
#endif
  }
  return requested;
}

Precision resolve_precision(Precision requested, Device device) {
  const Precision native = device == Device::CPU ? Precision::FP32 : Precision::FP16;
  if (requested == Precision::Auto) return native;
  if (requested == Precision::INT8)
    throw Error("precision int8: int8 kernels are not available yet in this build");
  if (requested != native)
    throw Error(std::string("precision ") + to_string(requested) + " is not available on the " +
                to_string(device) + " device (it runs " + to_string(native) + " kernels)");
  return requested;
}

void check_weights_bound(const Graph& graph) {
  for (const Node& node : graph.nodes)
    for (const Param& param : node.params)
      if (param.value.data.empty())
        throw_error({graph.source_file, node.line, node.column, node.name, param.key},
                    "weights are not loaded (give a weight file or use random weights)");
}

const KernelEntry* choose_kernel(const Node& node, const Graph& graph, Device device,
                                 Precision precision, const BuildOptions& options) {
  const KernelRegistry& registry = KernelRegistry::instance();
  std::vector<const KernelEntry*> candidates = registry.candidates(node, device, precision);
  ErrorSite site{graph.source_file, node.line, node.column, node.name, ""};
  auto override_it = options.kernel_overrides.find(node.name);
  if (override_it != options.kernel_overrides.end()) {
    for (const KernelEntry* entry : candidates)
      if (entry->name == override_it->second) return entry;
    std::string names;
    for (const KernelEntry* entry : candidates) names += (names.empty() ? "" : ", ") + entry->name;
    throw_error(site, "kernel '" + override_it->second + "' cannot run this layer on " +
                          to_string(device) + "/" + to_string(precision) +
                          " (candidates: " + (names.empty() ? "none" : names) + ")");
  }
  // candidates() lists non-baselines first, each group by priority: the default is the front.
  if (!candidates.empty()) return candidates.front();
  throw_error(site, std::string("no ") + to_string(device) + "/" + to_string(precision) +
                        " kernel supports this " + op_name(node.op) + " layer");
}

}  // namespace

std::unique_ptr<EngineImpl> build_engine(Graph graph, const BuildOptions& options) {
  auto engine = std::make_unique<EngineImpl>();
  engine->device = resolve_device(options.device);
  engine->precision = resolve_precision(options.precision, engine->device);

  check_weights_bound(graph);
  if (options.fuse)
    run_default_passes(graph);  // ends with infer_shapes
  else
    infer_shapes(graph);

  for (const auto& [layer, kernel] : options.kernel_overrides)
    if (graph.find(layer) == nullptr)
      throw Error("kernel override for unknown layer '" + layer + "' (after fusion, layers are " +
                  "named after their first source layer)");

  engine->graph = std::move(graph);
  const Graph& g = engine->graph;
  engine->model.name = g.name;
  engine->model.input_shape = g.input.shape;
  engine->model.output_shape = g.find(g.output)->output_shape;
  engine->model.mean = g.input.mean;
  engine->model.std = g.input.std;
  // Labels are optional (classes print as indices), but a labels file the YAML names must exist.
  if (!g.labels_file.empty()) engine->model.labels = read_labels(g.labels_file);

#ifdef CNNRT_WITH_CUDA
  engine->backend = engine->device == Device::CUDA ? make_cuda_backend() : make_cpu_backend();
#else
  engine->backend = make_cpu_backend();
#endif

  for (const Node& node : g.nodes) {
    Step step;
    step.node = &node;
    step.entry = choose_kernel(node, g, engine->device, engine->precision, options);
    step.kernel = step.entry->create(KernelBuildContext{node, g});
    engine->weight_bytes += step.kernel->weight_bytes();
    engine->steps.push_back(std::move(step));
  }
  return engine;
}

std::vector<PlanRequest> activation_requests(const EngineImpl& engine, int batch) {
  const Graph& graph = engine.graph;
  const int last_step = static_cast<int>(engine.steps.size()) - 1;
  // Last step that reads each tensor; the graph output must survive to the end of the run.
  std::map<std::string, int> last_use;
  for (int i = 0; i <= last_step; ++i)
    for (const std::string& input : engine.steps[i].node->inputs)
      last_use[input] = i;  // steps run in order: the last write is the last reader
  last_use[graph.output] = last_step;

  std::vector<PlanRequest> requests;
  PlanRequest input;
  input.name = "input";
  input.bytes = engine.backend->tensor_bytes(graph.input.shape, batch);
  input.first_step = 0;
  input.last_step = last_use.count("input") ? last_use["input"] : 0;
  requests.push_back(input);

  for (int i = 0; i <= last_step; ++i) {
    const Node& node = *engine.steps[i].node;
    PlanRequest request;
    request.name = node.name;
    request.bytes = engine.backend->tensor_bytes(node.output_shape, batch);
    request.first_step = i;
    request.last_step = last_use.count(node.name) ? last_use[node.name] : i;
    // Elementwise and view ops may write over their input (the kernels accept
    // output == input); the planner decides whether that is legal here.
    if (node.op == OpKind::Relu || node.op == OpKind::Dropout || node.op == OpKind::Flatten)
      request.may_alias = node.inputs.at(0);
    requests.push_back(request);
  }
  // Each step's workspace lives for exactly its own step.
  for (int i = 0; i <= last_step; ++i) {
    const size_t bytes = engine.steps[i].kernel->workspace_bytes(batch);
    if (bytes > 0) requests.push_back({engine.steps[i].node->name + ".workspace", bytes, i, i, ""});
  }
  return requests;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : 0.5 * (values[middle - 1] + values[middle]);
}

double step_flops(const Step& step, int batch) { return node_flops(*step.node) * batch; }

double step_bytes(const EngineImpl& engine, const Step& step, int batch) {
  const Node& node = *step.node;
  double bytes = static_cast<double>(engine.backend->tensor_bytes(node.output_shape, batch));
  for (const Shape& shape : node.input_shapes)
    bytes += static_cast<double>(engine.backend->tensor_bytes(shape, batch));
  const double element_bytes = engine.precision == Precision::FP32 ? 4.0 : 2.0;
  bytes += element_bytes * static_cast<double>(node_param_count(node));
  return bytes;
}

LayerProfile profile_row(const Step& step) {
  LayerProfile row;
  row.name = step.node->name;
  row.sources = step.node->source_layers;
  if (row.sources.empty()) row.sources.push_back(step.node->name);
  row.kernel = step.entry->name;
  row.precision = to_string(step.entry->precision);
  return row;
}

}  // namespace cnnrt
