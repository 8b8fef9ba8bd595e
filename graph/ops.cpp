// The op table.  One row per op holds what the rest of graph/ needs to know about it: its YAML
// spelling and keys, its weight roles, its arity, and three small functions (parse attributes
// from YAML, infer the output shape, count FLOPs).  Everything else dispatches through the row,
// so adding an op touches this file and a reference kernel, nothing else in graph/.
//
// FLOP convention (documented in docs/FORMAT.md): a multiply-add counts 2 (conv, linear; bias
// adds are not counted, as in the usual published figures); elementwise ops (relu, relu6, clip,
// add, batchnorm, softmax) count 1 per output element; pools count 1 per window element per output
// element (padding included); LRN counts `size` per output element; flatten, dropout and concat
// are free.  A fused node adds its epilogue: 1 per pre-pool element for the activation, 1 per
// output element for a fused residual add, the pool's window count for a fused max-pool.
#include "graph/ops.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "cnnrt/error.h"
#include "graph/op_parse.h"

namespace cnnrt {
namespace {

[[noreturn]] void shape_error(const Node& node, const std::string& file,
                              const std::string& message) {
  ErrorSite site;
  site.file = file;
  site.line = node.line;
  site.column = node.column;
  site.layer = node.name;
  throw_error(site, message);
}

const Shape& first_input(const Node& node) { return node.input_shapes.at(0); }

void require_rank(const Node& node, const std::string& file, size_t rank, const char* layout) {
  const Shape& in = first_input(node);
  if (in.size() != rank)
    shape_error(node, file,
                std::string(op_info(node.op).name) + " expects a " + layout + " input, got " +
                    shape_to_string(in));
}

// --- YAML attribute parsers ---------------------------------------------------------------

// Reads optional/required keys of one layer map.
struct LayerReader {
  const YAML::Node& layer;
  const YamlContext& context;

  YAML::Node get(const char* key) const { return layer[key]; }
  bool has(const char* key) const { return static_cast<bool>(layer[key]); }
  YAML::Node required(const char* key) const {
    YAML::Node value = layer[key];
    if (!value) context.fail(layer, std::string("missing required key '") + key + "'");
    return value;
  }
  std::pair<int, int> pair(const char* key, int min_value, std::pair<int, int> fallback) const {
    return has(key) ? read_int_pair(get(key), context, key, min_value) : fallback;
  }
  double number(const char* key, double fallback) const {
    return has(key) ? read_number(get(key), context, key) : fallback;
  }
  bool boolean(const char* key, bool fallback) const {
    return has(key) ? read_bool(get(key), context, key) : fallback;
  }
};

Attrs parse_empty(const LayerReader&) { return EmptyAttrs{}; }

// Conv `padding`: p, [h, w], [top, left, bottom, right] or `same`.  An explicit list is stored
// as top/left plus the bottom/right extra beyond them (ConvAttrs), so symmetric models keep
// extra = 0 and kernels that only handle symmetric padding keep serving them; `same` is only
// flagged here, since its pads depend on the input size (resolve_same_padding).
void parse_conv_padding(const LayerReader& r, ConvAttrs& a) {
  if (!r.has("padding")) return;
  const YAML::Node value = r.get("padding");
  const std::string forms = "an integer, [h, w], [top, left, bottom, right] or same";
  if (value.IsScalar() && value.Scalar() == "same") {
    a.pad_same = true;
    return;
  }
  std::vector<int> pads;
  if (value.IsSequence()) {
    if (value.size() != 2 && value.size() != 4)
      r.context.fail(
          value, "'padding' must be " + forms + ", got a list of " + std::to_string(value.size()));
    for (const YAML::Node& item : value) pads.push_back(read_int(item, r.context, "padding"));
  } else {
    // read_int's own message would not mention the list and `same` forms.
    int both = 0;
    bool is_int = value.IsScalar();
    if (is_int) {
      try {
        both = value.as<int>();
      } catch (const YAML::Exception&) {
        is_int = false;
      }
    }
    if (!is_int)
      r.context.fail(value, "'padding' must be " + forms + ", got " + yaml_preview(value));
    pads = {both, both};
  }
  std::string written;
  for (int pad : pads) written += (written.empty() ? "" : ", ") + std::to_string(pad);
  if (std::any_of(pads.begin(), pads.end(), [](int pad) { return pad < 0; }))
    r.context.fail(value, "'padding' must be non-negative, got " +
                              (pads.size() == 2 && !value.IsSequence() ? std::to_string(pads[0])
                                                                       : "[" + written + "]"));
  a.pad_h = pads[0];
  a.pad_w = pads[1];
  if (pads.size() == 4) {
    a.pad_h_extra = pads[2] - pads[0];
    a.pad_w_extra = pads[3] - pads[1];
  }
}

Attrs parse_conv(const LayerReader& r) {
  ConvAttrs a;
  a.out_channels = read_positive_int(r.required("out_channels"), r.context, "out_channels");
  std::tie(a.kernel_h, a.kernel_w) = read_int_pair(r.required("kernel"), r.context, "kernel", 1);
  std::tie(a.stride_h, a.stride_w) = r.pair("stride", 1, {1, 1});
  parse_conv_padding(r, a);
  std::tie(a.dilation_h, a.dilation_w) = r.pair("dilation", 1, {1, 1});
  a.groups = r.has("groups") ? read_positive_int(r.get("groups"), r.context, "groups") : 1;
  return a;
}

Attrs parse_pool(const LayerReader& r) {
  PoolAttrs a;
  std::tie(a.kernel_h, a.kernel_w) = read_int_pair(r.required("kernel"), r.context, "kernel", 1);
  std::tie(a.stride_h, a.stride_w) = r.pair("stride", 1, {a.kernel_h, a.kernel_w});
  std::tie(a.pad_h, a.pad_w) = r.pair("padding", 0, {0, 0});
  a.ceil_mode = r.boolean("ceil_mode", false);
  a.count_include_pad = r.boolean("count_include_pad", true);  // key only accepted by avgpool
  return a;
}

Attrs parse_adaptive_pool(const LayerReader& r) {
  AdaptivePoolAttrs a;
  std::tie(a.out_h, a.out_w) =
      read_int_pair(r.required("output_size"), r.context, "output_size", 1);
  return a;
}

Attrs parse_linear(const LayerReader& r) {
  LinearAttrs a;
  a.out_features = read_positive_int(r.required("out_features"), r.context, "out_features");
  return a;
}

Attrs parse_dropout(const LayerReader& r) {
  DropoutAttrs a;
  a.p = static_cast<float>(r.number("p", 0.5));
  if (a.p < 0.0f || a.p >= 1.0f) r.context.fail(r.get("p"), "'p' must be in [0, 1)");
  return a;
}

// Both bounds optional (ONNX Clip may give one), but a clip without either would be a silent
// no-op, which is more likely a typo than intent.
Attrs parse_clip(const LayerReader& r) {
  ClipAttrs a;
  if (!r.has("min") && !r.has("max")) r.context.fail(r.layer, "clip needs 'min', 'max' or both");
  if (r.has("min")) a.min = static_cast<float>(r.number("min", 0.0));
  if (r.has("max")) a.max = static_cast<float>(r.number("max", 0.0));
  if (a.min > a.max)
    r.context.fail(r.get("max"), "clip 'min' (" + yaml_preview(r.get("min")) +
                                     ") is greater than 'max' (" + yaml_preview(r.get("max")) +
                                     ")");
  return a;
}

Attrs parse_softmax(const LayerReader&) { return SoftmaxAttrs{}; }
Attrs parse_concat(const LayerReader&) { return ConcatAttrs{}; }

Attrs parse_batchnorm(const LayerReader& r) {
  BatchNormAttrs a;
  a.eps = static_cast<float>(r.number("eps", 1e-5));
  if (!(a.eps > 0.0f)) r.context.fail(r.get("eps"), "'eps' must be positive");
  return a;
}

Attrs parse_lrn(const LayerReader& r) {
  LRNAttrs a;
  a.size = read_positive_int(r.required("size"), r.context, "size");
  a.alpha = static_cast<float>(r.number("alpha", 1e-4));
  a.beta = static_cast<float>(r.number("beta", 0.75));
  a.k = static_cast<float>(r.number("k", 1.0));
  // The divisor is (k + alpha/size * sum of squares)^beta: k > 0 and alpha >= 0 keep it positive,
  // so no input can make it 0 (Inf) or a negative base to a fractional power (NaN).  Checked
  // after the narrowing to float, where 1e300 becomes Inf.
  if (!(std::isfinite(a.k) && a.k > 0.0f)) r.context.fail(r.get("k"), "'k' must be positive");
  if (!(std::isfinite(a.alpha) && a.alpha >= 0.0f))
    r.context.fail(r.get("alpha"), "'alpha' must be a finite non-negative number");
  if (!std::isfinite(a.beta)) r.context.fail(r.get("beta"), "'beta' must be a finite number");
  return a;
}

// --- shape inference ----------------------------------------------------------------------

// Output extent of a window op along one axis, with the checks PyTorch makes.  Pools pad both
// sides alike (pad_end == pad_begin); a conv may not (TF "SAME", ONNX pads).
int64_t window_extent(const Node& node, const std::string& file, const char* axis, int64_t in,
                      int kernel, int stride, int pad_begin, int pad_end, int dilation,
                      bool ceil_mode) {
  const int64_t span = static_cast<int64_t>(dilation) * (kernel - 1) + 1;
  const int64_t padded = in + pad_begin + static_cast<int64_t>(pad_end);
  if (span > padded)
    shape_error(node, file,
                std::string("kernel ") + std::to_string(span) +
                    " is bigger than the padded input " + axis + " " + std::to_string(padded) +
                    " (input " + shape_to_string(first_input(node)) + ")");
  const int64_t out = ceil_mode
                          ? pool_output_size(in, kernel, stride, pad_begin, dilation, true)
                          : conv_output_size(in, kernel, stride, pad_begin, pad_end, dilation);
  if (out <= 0)
    shape_error(node, file, std::string("output ") + axis + " would be " + std::to_string(out));
  return out;
}

Shape pooled_shape(const Node& node, const std::string& file, const Shape& in, const PoolAttrs& a) {
  // PyTorch rejects padding above half the kernel: the window could lie entirely in padding.
  // int64: a padding near INT_MAX would wrap `pad * 2` negative and pass the check.
  if (int64_t{a.pad_h} * 2 > a.kernel_h || int64_t{a.pad_w} * 2 > a.kernel_w)
    shape_error(node, file, "pool padding must be at most half the kernel size");
  return {in[0],
          window_extent(node, file, "height", in[1], a.kernel_h, a.stride_h, a.pad_h, a.pad_h, 1,
                        a.ceil_mode),
          window_extent(node, file, "width", in[2], a.kernel_w, a.stride_w, a.pad_w, a.pad_w, 1,
                        a.ceil_mode)};
}

void infer_same(Node& node, const std::string&) { node.output_shape = first_input(node); }

void infer_conv(Node& node, const std::string& file) {
  require_rank(node, file, 3, "[C, H, W]");
  const Shape& in = first_input(node);
  ConvAttrs& a = node.get<ConvAttrs>();
  if (a.pad_same) resolve_same_padding(a, in[1], in[2]);
  if (in[0] % a.groups != 0)
    shape_error(node, file,
                "input channels " + std::to_string(in[0]) + " are not divisible by groups " +
                    std::to_string(a.groups));
  if (a.out_channels % a.groups != 0)
    shape_error(node, file,
                "out_channels " + std::to_string(a.out_channels) + " is not divisible by groups " +
                    std::to_string(a.groups));
  if (a.pad_h < 0 || a.pad_w < 0 || a.pad_bottom() < 0 || a.pad_right() < 0)
    shape_error(node, file, "negative conv padding");
  node.pre_pool_shape = {a.out_channels,
                         window_extent(node, file, "height", in[1], a.kernel_h, a.stride_h, a.pad_h,
                                       a.pad_bottom(), a.dilation_h, false),
                         window_extent(node, file, "width", in[2], a.kernel_w, a.stride_w, a.pad_w,
                                       a.pad_right(), a.dilation_w, false)};
  node.output_shape = node.fused_maxpool
                          ? pooled_shape(node, file, node.pre_pool_shape, *node.fused_maxpool)
                          : node.pre_pool_shape;
  if (node.fused_residual && (node.fused_maxpool || node.input_shapes.size() != 2 ||
                              node.input_shapes[1] != node.output_shape))
    shape_error(node, file,
                "internal: a fused residual must have the conv's output shape " +
                    shape_to_string(node.output_shape) + " and no fused pool");
}

void infer_pool(Node& node, const std::string& file) {
  require_rank(node, file, 3, "[C, H, W]");
  node.output_shape = pooled_shape(node, file, first_input(node), node.get<PoolAttrs>());
}

void infer_adaptive_pool(Node& node, const std::string& file) {
  require_rank(node, file, 3, "[C, H, W]");
  const AdaptivePoolAttrs& a = node.get<AdaptivePoolAttrs>();
  node.output_shape = {first_input(node)[0], a.out_h, a.out_w};
}

void infer_linear(Node& node, const std::string& file) {
  const Shape& in = first_input(node);
  if (in.size() != 1)
    shape_error(node, file,
                "linear expects a 1-D input [features], got " + shape_to_string(in) +
                    ": add a flatten layer before it");
  node.output_shape = {node.get<LinearAttrs>().out_features};
}

void infer_flatten(Node& node, const std::string&) {
  node.output_shape = {shape_elements(first_input(node))};
}

void infer_add(Node& node, const std::string& file) {
  if (node.input_shapes[0] != node.input_shapes[1])
    shape_error(node, file,
                "add needs equal shapes, got " + shape_to_string(node.input_shapes[0]) + " ('" +
                    node.inputs[0] + "') and " + shape_to_string(node.input_shapes[1]) + " ('" +
                    node.inputs[1] + "')");
  node.output_shape = node.input_shapes[0];
}

void infer_concat(Node& node, const std::string& file) {
  Shape out = first_input(node);
  for (size_t i = 1; i < node.input_shapes.size(); ++i) {
    const Shape& in = node.input_shapes[i];
    if (in.size() != out.size() || !std::equal(in.begin() + 1, in.end(), out.begin() + 1))
      shape_error(node, file,
                  "concat needs inputs that differ only in channels, got " +
                      shape_to_string(first_input(node)) + " ('" + node.inputs[0] + "') and " +
                      shape_to_string(in) + " ('" + node.inputs[i] + "')");
    out[0] += in[0];
  }
  node.output_shape = out;
}

// --- costs --------------------------------------------------------------------------------

double elements(const Shape& shape) { return static_cast<double>(shape_elements(shape)); }

double conv_flops(const Node& node) {
  const ConvAttrs& a = node.get<ConvAttrs>();
  const Shape& conv_out = node.pre_pool_shape.empty() ? node.output_shape : node.pre_pool_shape;
  const double macs_per_output =
      static_cast<double>(first_input(node)[0] / a.groups) * a.kernel_h * a.kernel_w;
  double flops = 2.0 * elements(conv_out) * macs_per_output;
  if (node.activation != Activation::None) flops += elements(conv_out);
  if (node.fused_residual) flops += elements(conv_out);
  if (node.fused_maxpool)
    flops +=
        elements(node.output_shape) * node.fused_maxpool->kernel_h * node.fused_maxpool->kernel_w;
  return flops;
}

double linear_flops(const Node& node) {
  double flops = 2.0 * elements(first_input(node)) * node.get<LinearAttrs>().out_features;
  if (node.activation != Activation::None) flops += elements(node.output_shape);
  return flops;
}

double no_flops(const Node&) { return 0.0; }
double per_element_flops(const Node& node) { return elements(node.output_shape); }

double pool_flops(const Node& node) {
  const PoolAttrs& a = node.get<PoolAttrs>();
  return elements(node.output_shape) * a.kernel_h * a.kernel_w;
}

// Adaptive windows differ in size: sum them exactly (window i spans
// [floor(i*in/out), ceil((i+1)*in/out))).
double adaptive_pool_flops(const Node& node) {
  const Shape& in = first_input(node);
  const AdaptivePoolAttrs& a = node.get<AdaptivePoolAttrs>();
  auto window_sum = [](int64_t in_size, int64_t out_size) {
    double total = 0;
    for (int64_t i = 0; i < out_size; ++i)
      total += static_cast<double>(((i + 1) * in_size + out_size - 1) / out_size -
                                   (i * in_size) / out_size);
    return total;
  };
  return static_cast<double>(in[0]) * window_sum(in[1], a.out_h) * window_sum(in[2], a.out_w);
}

double lrn_flops(const Node& node) {
  return elements(node.output_shape) * node.get<LRNAttrs>().size;
}

// --- the table ----------------------------------------------------------------------------

struct OpRow {
  OpInfo info;
  Attrs (*parse)(const LayerReader&);
  void (*infer)(Node&, const std::string&);
  double (*flops)(const Node&);
};

const std::vector<OpRow>& op_table() {
  static const std::vector<OpRow> table = {
      {{OpKind::Conv,
        "conv",
        {"out_channels", "kernel", "stride", "padding", "dilation", "groups"},
        {"weight", "bias"},
        {"bias"},
        1,
        1},
       parse_conv,
       infer_conv,
       conv_flops},
      {{OpKind::Relu, "relu", {}, {}, {}, 1, 1}, parse_empty, infer_same, per_element_flops},
      {{OpKind::MaxPool, "maxpool", {"kernel", "stride", "padding", "ceil_mode"}, {}, {}, 1, 1},
       parse_pool,
       infer_pool,
       pool_flops},
      {{OpKind::AvgPool,
        "avgpool",
        {"kernel", "stride", "padding", "ceil_mode", "count_include_pad"},
        {},
        {},
        1,
        1},
       parse_pool,
       infer_pool,
       pool_flops},
      {{OpKind::AdaptiveAvgPool, "adaptive_avgpool", {"output_size"}, {}, {}, 1, 1},
       parse_adaptive_pool,
       infer_adaptive_pool,
       adaptive_pool_flops},
      {{OpKind::Linear, "linear", {"out_features"}, {"weight", "bias"}, {"bias"}, 1, 1},
       parse_linear,
       infer_linear,
       linear_flops},
      {{OpKind::Flatten, "flatten", {}, {}, {}, 1, 1}, parse_empty, infer_flatten, no_flops},
      {{OpKind::Dropout, "dropout", {"p"}, {}, {}, 1, 1}, parse_dropout, infer_same, no_flops},
      {{OpKind::Softmax, "softmax", {}, {}, {}, 1, 1},
       parse_softmax,
       infer_same,
       per_element_flops},
      {{OpKind::BatchNorm,
        "batchnorm",
        {"eps"},
        {"weight", "bias", "running_mean", "running_var"},
        {},
        1,
        1},
       parse_batchnorm,
       infer_same,
       per_element_flops},
      {{OpKind::Add, "add", {}, {}, {}, 2, 2}, parse_empty, infer_add, per_element_flops},
      {{OpKind::Concat, "concat", {}, {}, {}, 2, -1}, parse_concat, infer_concat, no_flops},
      {{OpKind::LRN, "lrn", {"size", "alpha", "beta", "k"}, {}, {}, 1, 1},
       parse_lrn,
       infer_same,
       lrn_flops},
      {{OpKind::Relu6, "relu6", {}, {}, {}, 1, 1}, parse_empty, infer_same, per_element_flops},
      {{OpKind::Clip, "clip", {"min", "max"}, {}, {}, 1, 1},
       parse_clip,
       infer_same,
       per_element_flops},
  };
  return table;
}

const OpRow& row_of(OpKind op) {
  for (const OpRow& row : op_table())
    if (row.info.op == op) return row;
  throw Error("internal: op kind " + std::to_string(static_cast<int>(op)) + " not in op table");
}

}  // namespace

const OpInfo* find_op(const std::string& name) {
  for (const OpRow& row : op_table())
    if (name == row.info.name) return &row.info;
  return nullptr;
}

const OpInfo& op_info(OpKind op) { return row_of(op).info; }

std::string valid_op_names() {
  std::string names;
  for (const OpRow& row : op_table())
    names += (names.empty() ? "" : ", ") + std::string(row.info.name);
  return names;
}

Attrs parse_op_attrs(const OpInfo& info, const YAML::Node& layer, const YamlContext& context) {
  return row_of(info.op).parse(LayerReader{layer, context});
}

void infer_node_shape(Node& node, const std::string& source_file) {
  const OpInfo& info = op_info(node.op);
  // A conv with a fused residual (graph/passes.h) reads one tensor more than its YAML form.
  const int count = static_cast<int>(node.inputs.size()) - (node.fused_residual ? 1 : 0);
  if (node.fused_residual && node.op != OpKind::Conv)
    shape_error(node, source_file, "internal: a fused residual on a non-conv node");
  if (count < info.min_inputs || (info.max_inputs >= 0 && count > info.max_inputs))
    shape_error(node, source_file,
                std::string(info.name) + " takes " + std::to_string(info.min_inputs) +
                    (info.max_inputs < 0 ? " or more" : "") + " input(s), got " +
                    std::to_string(count));
  if (node.input_shapes.size() != node.inputs.size())
    shape_error(node, source_file, "internal: input shapes not resolved");
  for (const Shape& in : node.input_shapes)
    if (in.empty() || std::any_of(in.begin(), in.end(), [](int64_t d) { return d <= 0; }))
      shape_error(node, source_file, "invalid input shape " + shape_to_string(in));
  if (node.op != OpKind::Conv) node.pre_pool_shape.clear();
  row_of(node.op).infer(node, source_file);
}

Shape expected_param_shape(const Node& node, const std::string& role) {
  if (node.input_shapes.empty() || node.input_shapes[0].empty())
    throw Error("layer '" + node.name + "': shapes must be inferred before weights");
  const Shape& in = node.input_shapes[0];
  switch (node.op) {
    case OpKind::Conv: {
      const ConvAttrs& a = node.get<ConvAttrs>();
      if (role == "weight") return {a.out_channels, in[0] / a.groups, a.kernel_h, a.kernel_w};
      if (role == "bias") return {a.out_channels};
      break;
    }
    case OpKind::Linear: {
      const LinearAttrs& a = node.get<LinearAttrs>();
      if (role == "weight") return {a.out_features, shape_elements(in)};
      if (role == "bias") return {a.out_features};
      break;
    }
    case OpKind::BatchNorm:
      if (role == "weight" || role == "bias" || role == "running_mean" || role == "running_var")
        return {in[0]};
      break;
    default:
      break;
  }
  throw Error("layer '" + node.name + "': op " + op_name(node.op) + " has no parameter '" + role +
              "'");
}

double node_flops(const Node& node) { return row_of(node.op).flops(node); }

int64_t node_param_count(const Node& node) {
  int64_t count = 0;
  for (const Param& param : node.params)
    count += param.value.data.empty() ? shape_elements(expected_param_shape(node, param.role))
                                      : param.value.elements();
  return count;
}

int64_t conv_output_size(int64_t in, int kernel, int stride, int pad_begin, int pad_end,
                         int dilation) {
  const int64_t numerator = in + pad_begin + static_cast<int64_t>(pad_end) -
                            static_cast<int64_t>(dilation) * (kernel - 1) - 1;
  if (numerator < 0) return 0;
  return numerator / stride + 1;
}

// TensorFlow's rule: the output covers ceil(in / stride) positions, and the padding that needs
// is split with the odd pixel at the bottom / right.
void resolve_same_padding(ConvAttrs& attrs, int64_t in_h, int64_t in_w) {
  auto resolve_axis = [](int64_t in, int kernel, int stride, int dilation, int& begin, int& extra) {
    const int64_t out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>(
        (out - 1) * stride + static_cast<int64_t>(kernel - 1) * dilation + 1 - in, 0);
    begin = static_cast<int>(total / 2);
    extra = static_cast<int>(total - 2 * (total / 2));
  };
  resolve_axis(in_h, attrs.kernel_h, attrs.stride_h, attrs.dilation_h, attrs.pad_h,
               attrs.pad_h_extra);
  resolve_axis(in_w, attrs.kernel_w, attrs.stride_w, attrs.dilation_w, attrs.pad_w,
               attrs.pad_w_extra);
}

int64_t pool_output_size(int64_t in, int kernel, int stride, int pad, int dilation,
                         bool ceil_mode) {
  const int64_t numerator =
      in + 2 * static_cast<int64_t>(pad) - static_cast<int64_t>(dilation) * (kernel - 1) - 1;
  if (numerator < 0) return 0;
  int64_t out = (ceil_mode ? (numerator + stride - 1) / stride : numerator / stride) + 1;
  // PyTorch: with ceil_mode the last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

}  // namespace cnnrt
