// The builder: fused graph → Engine.
//
// Per layer it decides the precision and the kernel, in this order (docs/FORMAT.md, "Per-layer
// choices"): the build's layer choices (a plan file, BuildOptions::layer_choices), else the
// model's own `precision:` / `kernel:` keys, else the engine-wide precision with the default
// heuristic (the highest-priority non-baseline kernel).  An explicit request no kernel can honour
// is an error naming the layer, the request and the kernels that exist for it; a layer that
// asked for nothing and has no kernel at the engine-wide precision takes the best kernel of
// another precision (fp32 first), which the plan shows.
//
// Then it binds types: every tensor has the type its producer writes (the graph input: fp32
// NCHW as run() receives it); each input of a step is bound to the first type the kernel
// accepts that needs no conversion, else to the kernel's preferred type through a conversion
// step inserted just before the first step that needs it (one per tensor and type).  The tensor
// run() returns is the graph output as fp32 NCHW, converted at the end if needed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "graph/model_loader.h"
#include "graph/ops.h"
#include "graph/passes.h"
#include "graph/passes_compact.h"
#include "graph/passes_sparsity.h"
#include "runtime/backends.h"
#include "runtime/build_trace.h"
#include "runtime/engine_impl.h"
#include "runtime/plan_file.h"

namespace cnnrt {
namespace {

Device resolve_device(Device requested) {
  const BackendInfo* cuda = find_backend(Device::CUDA);
  if (requested == Device::Auto)
    return cuda != nullptr && cuda->available() ? Device::CUDA : Device::CPU;
  const BackendInfo* backend = find_backend(requested);
  if (backend == nullptr)
    throw Error(std::string("device ") + to_string(requested) +
                ": this build of cnnrt has no backend for it (CUDA needs nvcc at build time)");
  if (!backend->available())
    throw Error(std::string("device ") + to_string(requested) + ": no usable device found");
  return requested;
}

Precision native_precision(Device device) {
  return device == Device::CPU ? Precision::FP32 : Precision::FP16;
}

void check_weights_bound(const Graph& graph) {
  for (const Node& node : graph.nodes)
    for (const Param& param : node.params)
      if (param.value.data.empty())
        throw_error({graph.source_file, node.line, node.column, node.name, param.key},
                    "weights are not loaded (give a weight file or use random weights)");
}

ErrorSite site_of(const Graph& graph, const Node& node) {
  return {graph.source_file, node.line, node.column, node.name, ""};
}

// The layer choices keyed by fused node name.  A choice may name the fused node or any source
// layer it covers; an unknown name is an error listing the layers there are.
std::map<std::string, LayerChoice> choices_by_node(const Graph& graph,
                                                   const std::map<std::string, LayerChoice>& in) {
  std::map<std::string, std::string> node_of;  // source layer -> fused node
  for (const Node& node : graph.nodes) {
    node_of[node.name] = node.name;
    for (const std::string& source : node.source_layers) node_of[source] = node.name;
  }
  std::map<std::string, LayerChoice> out;
  for (const auto& [layer, choice] : in) {
    auto it = node_of.find(layer);
    if (it == node_of.end()) {
      std::string names;
      for (const Node& node : graph.nodes)
        for (const std::string& source : node.source_layers)
          names += (names.empty() ? "" : ", ") + source;
      throw Error((choice.origin.empty() ? "" : choice.origin + ": ") + "layer '" + layer +
                  "' is not in model " + graph.name + " (layers: " + names + ")");
    }
    LayerChoice& merged = out[it->second];
    if (choice.precision != Precision::Auto) merged.precision = choice.precision;
    if (!choice.kernel.empty()) merged.kernel = choice.kernel;
    if (!choice.sparsity.empty()) merged.sparsity = choice.sparsity;
    if (merged.origin.empty()) merged.origin = choice.origin;
  }
  return out;
}

std::string kernels_for(const Node& node, Device device) {
  std::string names;
  for (const KernelEntry& entry : KernelRegistry::instance().entries())
    if (entry.op == node.op && entry.device == device && entry.supports(node))
      names += (names.empty() ? "" : ", ") + entry.name + " (" + to_string(entry.precision) + ")";
  return names.empty() ? "none" : names;
}

// The kernel of one layer (see the header comment for the order of precedence).
const KernelEntry* choose_kernel(const Graph& graph, const Node& node, Device device,
                                 Precision engine_precision, const LayerChoice* choice) {
  const KernelRegistry& registry = KernelRegistry::instance();
  Precision precision = Precision::Auto;
  std::string kernel, origin;
  if (choice != nullptr) {
    precision = choice->precision;
    kernel = choice->kernel;
    origin = choice->origin;
  }
  if (precision == Precision::Auto && !node.precision_request.empty())
    precision = parse_precision(node.precision_request);
  if (kernel.empty()) kernel = node.kernel_request;
  std::string sparsity = choice != nullptr ? choice->sparsity : "";
  if (sparsity.empty()) sparsity = node.sparsity_request;
  ErrorSite site = site_of(graph, node);
  const std::string where = origin.empty() ? "" : " (" + origin + ")";
  if (sparsity == "2:4" && !node.weight_2_4)
    throw_error(site, "sparsity 2:4" + where + ": " + sparsity::node_violation(node));
  // Sparse kernels run only where asked for (sparsity 2:4, or by name): a 2:4 model keeps its
  // dense kernels otherwise, and `sparsity: dense` refuses a sparse kernel named elsewhere.
  const bool want_sparse = sparsity == "2:4";
  auto wanted = [&](std::vector<const KernelEntry*> candidates) {
    candidates.erase(
        std::remove_if(candidates.begin(), candidates.end(),
                       [&](const KernelEntry* e) { return e->sparse_2_4 != want_sparse; }),
        candidates.end());
    return candidates;
  };

  if (!kernel.empty()) {
    const KernelEntry* entry = registry.find(kernel);
    if (entry == nullptr || entry->op != node.op || entry->device != device ||
        !entry->supports(node) || (precision != Precision::Auto && entry->precision != precision) ||
        (!sparsity.empty() && entry->sparse_2_4 != want_sparse))
      throw_error(site,
                  "kernel '" + kernel + "'" +
                      (precision != Precision::Auto ? std::string(" at ") + to_string(precision)
                                                    : std::string()) +
                      where + " cannot run this layer on " + to_string(device) +
                      " (kernels for it: " + kernels_for(node, device) + ")");
    return entry;
  }
  if (precision != Precision::Auto) {
    std::vector<const KernelEntry*> candidates =
        wanted(registry.candidates(node, device, precision));
    if (candidates.empty() || candidates.front()->baseline)
      throw_error(site, std::string("precision ") + to_string(precision) +
                            (want_sparse ? " with sparsity 2:4" : "") + where + ": no " +
                            to_string(device) + " kernel at that precision runs this " +
                            op_name(node.op) +
                            " layer (kernels for it: " + kernels_for(node, device) + ")");
    return candidates.front();
  }
  // Nothing asked: the engine-wide precision, else the best kernel of another precision.
  for (Precision p : {engine_precision, Precision::FP32, Precision::FP16, Precision::INT8}) {
    std::vector<const KernelEntry*> candidates = wanted(registry.candidates(node, device, p));
    if (!candidates.empty() && !candidates.front()->baseline) return candidates.front();
  }
  throw_error(site, std::string("no ") + to_string(device) + (want_sparse ? " 2:4 sparse" : "") +
                        " kernel supports this " + op_name(node.op) +
                        " layer (kernels for it: " + kernels_for(node, device) + ")");
}

// Same bytes in memory for a tensor of this shape: layouts differ only for [C, H, W] maps.
bool same_storage(const Shape& shape, const TensorType& a, const TensorType& b) {
  if (shape.size() == 3) return a == b;
  TensorType b_as_a = b;
  b_as_a.layout = a.layout;
  return a == b_as_a;
}

// "fp16_nhwc8": the suffix of a converted tensor's name.
std::string type_tag(const TensorType& type) {
  std::string tag =
      std::string(to_string(type.dtype)) + "_" + (type.layout == Layout::NCHW ? "nchw" : "nhwc");
  if (type.channel_align > 1) tag += std::to_string(type.channel_align);
  return tag;
}

// Appends steps to the engine, inserting conversions where types differ.
class StepBinder {
 public:
  explicit StepBinder(EngineImpl& engine) : engine_(engine) {}

  // The name of `tensor` as `type`: itself, or a conversion step's output (made once).
  std::string as_type(const std::string& tensor, const TensorType& type) {
    const EngineTensor& source = engine_.tensors.at(tensor);
    if (same_storage(source.shape, source.type, type)) return tensor;
    const std::string name = tensor + "." + type_tag(type);
    if (engine_.tensors.count(name) != 0) return name;
    Step step;
    step.name = name;
    step.inputs = {tensor};
    step.kernel = engine_.backend->make_conversion(source.shape, source.type, type);
    step.kernel_name = "convert_" + type_tag(source.type) + "_to_" + type_tag(type);
    step.precision = type.dtype == DType::F32   ? Precision::FP32
                     : type.dtype == DType::F16 ? Precision::FP16
                                                : Precision::INT8;
    step.input_types = {source.type};
    engine_.tensors[name] = {source.shape, type};
    engine_.steps.push_back(std::move(step));
    return name;
  }

  // Binds each input of a layer step to an accepted type, then appends it.
  void add_layer(Step step, const Shape& output_shape) {
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      const EngineTensor& source = engine_.tensors.at(step.inputs[i]);
      const std::vector<TensorType> accepted = step.kernel->input_types(i);
      if (accepted.empty())
        throw Error("internal: kernel " + step.kernel_name + " accepts no input type");
      auto direct = std::find_if(accepted.begin(), accepted.end(), [&](const TensorType& t) {
        return same_storage(source.shape, source.type, t);
      });
      const TensorType bound = direct != accepted.end() ? *direct : accepted.front();
      step.inputs[i] = as_type(step.inputs[i], bound);
      step.input_types.push_back(bound);
    }
    engine_.tensors[step.name] = {output_shape, step.kernel->output_type()};
    engine_.steps.push_back(std::move(step));
  }

 private:
  EngineImpl& engine_;
};

// A plan made for other weights or another version of the model is refused, before the passes
// change the graph the fingerprint describes.
void check_fingerprint(const Graph& graph, const BuildOptions& options) {
  // A plan for another model altogether is reported as such, after the passes.
  if (options.choices_fingerprint.empty() ||
      (!options.choices_model.empty() && options.choices_model != graph.name))
    return;
  const std::string actual = model_fingerprint(graph);
  if (actual == options.choices_fingerprint) return;
  std::string where;
  if (!options.layer_choices.empty()) {
    where = options.layer_choices.begin()->second.origin;
    where = where.substr(0, where.find(':')) + ": ";
  }
  // A plan that pruned layers runs on its own weight file: the likely mistake is other weights.
  const std::string hint = options.choices_weights.empty()
                               ? ""
                               : "; the plan runs on the weights " + options.choices_weights +
                                     " (its pruned layers pruned): load those";
  throw Error(where + "stale plan: it was made for model_hash " + options.choices_fingerprint +
              ", but " + graph.source_file + " (model '" + graph.name +
              "') with these weights hashes to " + actual +
              " (the model or its weights changed, or the plan was made before 2026-11-23, when "
              "the hash of weights past 4 MB changed): make it again with cnnrt build" +
              hint);
}

}  // namespace

std::shared_ptr<void> enter_plan_target(Device device, const std::string& target) {
  if (target.empty()) return nullptr;
  const BackendInfo* backend = find_backend(device);
  if (backend == nullptr || backend->enter_plan_target == nullptr)
    throw Error("plan target '" + target + "': device " + to_string(device) +
                (backend == nullptr ? " has no backend in this build"
                                    : " has no described targets (they are CUDA's)"));
  return backend->enter_plan_target(target);
}

// The int8 kernels have no residual epilogue: a build where int8 layers are possible keeps its
// adds (a conv fused with its add would have no int8 kernel, and the calibration's tensors are
// those of the unfused graph).
PassOptions pass_options(const BuildOptions& options) {
  PassOptions passes;
  bool int8 = options.precision == Precision::INT8 || options.calibration != nullptr;
  for (const auto& [layer, choice] : options.layer_choices)
    int8 = int8 || choice.precision == Precision::INT8;
  passes.fuse_residual = options.fuse_residual && !int8;
  return passes;
}

FusedGraph fuse_graph(Graph graph, const BuildOptions& options) {
  BuildTrace trace;
  check_weights_bound(graph);
  check_fingerprint(graph, options);
  FusedGraph fused;
  if (options.fuse)
    run_default_passes(graph, pass_options(options));  // ends with infer_shapes
  else
    infer_shapes(graph);
  if (options.compact_channels)
    fused.compacted = compact_pruned_channels(graph);  // re-infers shapes when it removes any
  sparsity::mark_2_4_weights(graph);
  fused.graph = std::make_shared<const Graph>(std::move(graph));
  trace.mark("graph passes");
  return fused;
}

std::shared_ptr<LayerKernel> KernelCache::get(const std::string& layer, const KernelEntry& entry,
                                              const KernelBuildContext& context) {
  std::shared_ptr<LayerKernel>& kernel = kernels_[layer + "|" + entry.name];
  if (!kernel) {
    KernelBuildContext shared = context;
    shared.shared = &shared_;
    kernel = entry.create(shared);
    ++created_;
  }
  return kernel;
}

std::unique_ptr<EngineImpl> build_engine(Graph graph, const BuildOptions& options) {
  // The device is checked before the passes: a missing GPU is reported as such, not as
  // whatever the model's weights lack.
  {
    const std::shared_ptr<void> target = enter_plan_target(options.device, options.plan_target);
    if (!target) resolve_device(options.device);
  }
  return build_engine(fuse_graph(std::move(graph), options), options);
}

std::unique_ptr<EngineImpl> build_engine(const FusedGraph& fused, const BuildOptions& options,
                                         KernelCache* cache) {
  auto engine = std::make_unique<EngineImpl>();
  // A plan target stands in for the device (no availability check): the build touches none.
  const std::shared_ptr<void> target = enter_plan_target(options.device, options.plan_target);
  engine->device = target ? options.device : resolve_device(options.device);
  engine->plan_target = options.plan_target;
  engine->precision =
      options.precision == Precision::Auto ? native_precision(engine->device) : options.precision;
  engine->compacted = fused.compacted;

  BuildTrace trace;
  const Graph& g = *fused.graph;
  if (!options.choices_model.empty() && options.choices_model != g.name) {
    // The origin of any choice names the plan file ("plan.yaml:4:3").
    std::string where;
    if (!options.layer_choices.empty()) {
      where = options.layer_choices.begin()->second.origin;
      where = where.substr(0, where.find(':')) + ": ";
    }
    throw Error(where + "the layer choices were written for model '" + options.choices_model +
                "', not for " + g.source_file + " (model '" + g.name + "')");
  }
  const std::map<std::string, LayerChoice> choices = choices_by_node(g, options.layer_choices);

  engine->graph = fused.graph;
  engine->model.name = g.name;
  engine->model.input_shape = g.input.shape;
  engine->model.output_shape = g.find(g.output)->output_shape;
  engine->model.mean = g.input.mean;
  engine->model.std = g.input.std;
  // Labels are optional (classes print as indices), but a labels file the YAML names must exist.
  if (!g.labels_file.empty())
    engine->model.labels = read_labels(g.labels_file, shape_elements(engine->model.output_shape));
  engine->backend = find_backend(engine->device)->make();
  engine->calibration = options.calibration;
  trace.mark("backend");

  engine->tensors["input"] = {g.input.shape, fp32_nchw()};
  StepBinder binder(*engine);
  for (const Node& node : g.nodes) {
    auto choice = choices.find(node.name);
    Step step;
    step.name = node.name;
    step.inputs = node.inputs;
    step.sources = node.source_layers;
    if (step.sources.empty()) step.sources.push_back(node.name);
    step.node = &node;
    step.entry = choose_kernel(g, node, engine->device, engine->precision,
                               choice == choices.end() ? nullptr : &choice->second);
    step.kernel_name = step.entry->name;
    step.precision = step.entry->precision;
    const KernelBuildContext context{node, g, engine->calibration.get()};
    step.kernel = cache != nullptr ? cache->get(node.name, *step.entry, context)
                                   : std::shared_ptr<LayerKernel>(step.entry->create(context));
    binder.add_layer(std::move(step), node.output_shape);
    trace.mark(node.name + " (" + engine->steps.back().kernel_name + ")");
  }
  engine->output_tensor = binder.as_type(g.output, fp32_nchw());
  trace.mark("output conversion");
  // An engine-wide precision is a default, but one that no layer can take is a mistake.
  if (options.precision != Precision::Auto &&
      std::none_of(engine->steps.begin(), engine->steps.end(), [&](const Step& step) {
        return !step.is_conversion() && step.precision == options.precision;
      }))
    throw Error(std::string("precision ") + to_string(options.precision) + ": no " +
                to_string(engine->device) + " kernel at that precision runs any layer of " +
                g.name);
  for (const Step& step : engine->steps) engine->weight_bytes += step.kernel->weight_bytes();
  return engine;
}

PreparedContext prepare_context(const EngineImpl& engine, int batch, bool keep_all_tensors) {
  PreparedContext prepared;
  prepared.batch = batch;
  const int last_step = static_cast<int>(engine.steps.size()) - 1;
  // Last step that reads each tensor; the returned tensor must survive to the end of the run.
  std::map<std::string, int> last_use;
  for (int i = 0; i <= last_step; ++i)
    for (const std::string& input : engine.steps[i].inputs) last_use[input] = i;
  last_use[engine.output_tensor] = last_step;
  if (keep_all_tensors) {
    last_use["input"] = last_step;
    for (const Step& step : engine.steps) last_use[step.name] = last_step;
  }

  // Sizes rounded to the planner's alignment, so a kernel's 16-byte vector tail never reaches
  // into the next tensor.
  auto bytes_of = [&](const std::string& name) {
    const EngineTensor& tensor = engine.tensors.at(name);
    return (tensor_bytes(tensor.shape, tensor.type, batch) + 255) / 256 * 256;
  };
  std::vector<PlanRequest> requests;
  requests.push_back(
      {"input", bytes_of("input"), 0, last_use.count("input") ? last_use["input"] : 0, ""});
  for (int i = 0; i <= last_step; ++i) {
    const Step& step = engine.steps[i];
    KernelPlan plan = step.kernel->prepare({batch, step.input_types});
    PlanRequest request;
    request.name = step.name;
    request.bytes = bytes_of(step.name);
    request.first_step = i;
    request.last_step = last_use.count(step.name) ? last_use[step.name] : i;
    // The kernel may write over its first input; the planner decides whether that is legal.
    if (plan.in_place && !keep_all_tensors && !step.inputs.empty() &&
        bytes_of(step.inputs[0]) == request.bytes)
      request.may_alias = step.inputs[0];
    requests.push_back(request);
    prepared.kernel_plans.push_back(std::move(plan));
  }
  // Each step's workspace lives for exactly its own step.
  for (int i = 0; i <= last_step; ++i) {
    const size_t bytes = prepared.kernel_plans[i].workspace_bytes;
    if (bytes > 0) requests.push_back({engine.steps[i].name + ".workspace", bytes, i, i, ""});
  }
  prepared.memory = plan_memory(requests);
  return prepared;
}

void check_readable(const std::string& name, bool keep_all_tensors, const std::string& output) {
  if (!keep_all_tensors && name != output)
    throw Error("internal: tensor '" + name +
                "' is not kept by this context (create it with keep_all_tensors to read it)");
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : 0.5 * (values[middle - 1] + values[middle]);
}

double step_flops(const Step& step, int batch) {
  return step.node != nullptr ? node_flops(*step.node) * batch : 0.0;
}

double step_bytes(const EngineImpl& engine, const Step& step, int batch) {
  auto bytes_of = [&](const std::string& name) {
    const EngineTensor& tensor = engine.tensors.at(name);
    return static_cast<double>(tensor_bytes(tensor.shape, tensor.type, batch));
  };
  double bytes = bytes_of(step.name);
  for (const std::string& input : step.inputs) bytes += bytes_of(input);
  return bytes + static_cast<double>(step.kernel->weight_bytes());
}

LayerProfile profile_row(const Step& step, const KernelPlan& plan) {
  LayerProfile row;
  row.name = step.name;
  row.sources = step.sources;
  row.kernel = step.kernel_name;
  row.variant = plan.variant_name;
  row.precision = to_string(step.precision);
  return row;
}

}  // namespace cnnrt
