// Graph passes, run in this order by run_default_passes():
//   1. drop_dropout          dropout is the identity at inference
//   1b. drop_identity_ops    pools that map every pixel to itself (adaptive pool to the same
//                            size; 1x1 pools with stride 1 and no padding)
//   2. fold_batchnorm        conv → batchnorm  ⇒  conv with scaled weights and shifted bias
//   3. fuse_conv_activation  conv → relu | relu6 | clip (→ maxpool)  ⇒  one conv node with an
//                            epilogue (Node::activation, clip bounds, fused_maxpool)
//   4. fuse_conv_residual    conv → add(conv, r) (→ relu | relu6 | clip)  ⇒  one conv node that
//                            reads [x, r]: y = clamp(conv(x) + b + r) (Node::fused_residual; the
//                            rule's own preconditions are written above it in passes.cpp)
//   5. fuse_linear_activation linear → relu | relu6 | clip  ⇒  one linear node with an epilogue
// One pattern matcher (match_chain) serves every rule.  A fusion applies only when each
// intermediate tensor has a single consumer and is not the graph output; the surviving node
// keeps the first node's name and lists every covered layer in source_layers, so the
// profiler still names the YAML layers.  Consumers of the removed tensors are rewired.
#pragma once

#include "graph/ir.h"

namespace cnnrt {

struct PassStats {
  int dropouts_removed = 0;
  int identities_removed = 0;
  int batchnorms_folded = 0;
  int conv_activations_fused = 0;
  int conv_pools_fused = 0;
  int linear_activations_fused = 0;
  int conv_residuals_fused = 0;
};

struct PassOptions {
  // Off when the build has int8 layers: the int8 kernels have no residual epilogue, and a fused
  // node would leave them without their add (runtime/builder.cpp decides).
  bool fuse_residual = true;
};

PassStats drop_dropout(Graph& graph);
PassStats drop_identity_ops(Graph& graph);
PassStats fold_batchnorm(Graph& graph);
PassStats fuse_conv_activation(Graph& graph);
PassStats fuse_conv_residual(Graph& graph);
PassStats fuse_linear_activation(Graph& graph);
PassStats run_default_passes(Graph& graph, const PassOptions& options = {});

}  // namespace cnnrt
