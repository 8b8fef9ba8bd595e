// Deterministic initial weights (init_weights / bind_random_weights).
//
// Tests and benchmarks need weights that are identical on every platform and compiler, so this
// uses its own generator instead of <random> distributions (whose output is implementation-
// defined): splitmix64 seeded by (seed, param key), its top 24 bits as an exact float in [0, 1),
// and one affine map computed in double (the product is exact, so FMA contraction cannot change
// the result).  Keying by the param key makes a tensor's values independent of layer order and
// of which other layers exist.
//
// Ranges follow PyTorch's defaults: conv/linear weights kaiming_uniform(a=sqrt(5)), which is
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and biases on the same bound.  Batchnorm gets spread-out
// statistics (weight, running_var in [0.5, 1.5]; bias, running_mean in [-0.2, 0.2]) instead of
// PyTorch's identity init so that BN folding is actually exercised.
#include <cmath>

#include "cnnrt/error.h"
#include "graph/model_loader.h"
#include "graph/ops.h"

namespace cnnrt {
namespace {

struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Exactly representable float in [0, 1) from the top 24 bits.
  double uniform01() { return static_cast<double>(next() >> 40) * (1.0 / 16777216.0); }
};

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 0xCBF29CE484222325ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001B3ull;
  }
  return hash;
}

struct Range {
  double low, high;
};

Range init_range(const Node& node, const std::string& role) {
  if (node.op == OpKind::BatchNorm) {
    if (role == "weight" || role == "running_var") return {0.5, 1.5};
    return {-0.2, 0.2};  // bias, running_mean
  }
  // conv / linear: weight and bias share the bound 1/sqrt(fan_in), fan_in from the weight shape.
  const Shape weight_shape = expected_param_shape(node, "weight");
  const int64_t fan_in = shape_elements(weight_shape) / weight_shape[0];
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return {-bound, bound};
}

}  // namespace

std::map<std::string, HostTensor> init_weights(const Graph& graph, uint64_t seed) {
  std::map<std::string, HostTensor> weights;
  for (const Node& node : graph.nodes) {
    for (const Param& param : node.params) {
      HostTensor tensor;
      tensor.shape = expected_param_shape(node, param.role);
      tensor.data.resize(static_cast<size_t>(tensor.elements()));
      const Range range = init_range(node, param.role);
      SplitMix64 rng{seed * 0x9E3779B97F4A7C15ull ^ fnv1a(param.key)};
      for (float& value : tensor.data)
        value = static_cast<float>(range.low + (range.high - range.low) * rng.uniform01());
      weights[param.key] = std::move(tensor);
    }
  }
  return weights;
}

void bind_random_weights(Graph& graph, uint64_t seed) {
  bind_weights(graph, init_weights(graph, seed),
               "<random weights, seed " + std::to_string(seed) + ">");
}

}  // namespace cnnrt
