// Channel compaction: a channel-pruned model runs as a smaller dense one.
//
// An output channel of a conv (groups == 1) or linear whose weights are all zero carries a
// constant: its activation of its bias, act(b).  compact_pruned_channels removes such channels
// from the producer (weight rows, bias) and the matching input channels from every consumer it
// reaches through channel-preserving ops (relu, relu6, clip, max-pool, average pool, adaptive
// average pool, dropout, flatten, concat), adding the constant's contribution to the consumer's
// bias: Σ_taps W[o, c, tap] · v for a conv, Σ_spatial W[o, f] · v for a linear after a flatten.
// The result equals the uncompacted model's up to rounding.
//
// A producer is left whole (and the reason recorded) when a removal would change results or
// cannot be expressed: its output reaches the graph output, an add (a residual would need both
// sides pruned alike), a batchnorm, LRN, softmax or a grouped conv; its conv has a fused residual
// or groups != 1; the constant is non-zero and a consumer conv pads (border taps would read
// zeros instead of the constant) or an average pool counts padding; every channel is zero.
// The pass runs on the fused graph (conv epilogues carry their activation and max-pool).
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"

namespace cnnrt {

struct CompactedLayer {
  std::string layer;
  int channels_before = 0, channels_after = 0;
  std::vector<std::string> consumers;  // layers whose input channels were removed with them
};

struct CompactionReport {
  std::vector<CompactedLayer> layers;
  std::vector<std::string> kept;  // "conv3: 5 all-zero channels kept: its output reaches add 'res'"
  bool empty() const { return layers.empty() && kept.empty(); }
  std::string to_text() const;  // one line per layer, "" when nothing was found
};

// Removes every all-zero output channel it safely can (see above); re-infers shapes when it
// removed any.  Weights must be bound.
CompactionReport compact_pruned_channels(Graph& graph);

// The all-zero output rows of a conv (groups == 1) or linear node's weight, ascending.
std::vector<int> zero_output_channels(const Node& node);

}  // namespace cnnrt
