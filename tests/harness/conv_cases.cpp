// The harness's conv table (cases.cpp holds the other ops' and says what the rows cover and
// why).  Every conv kernel of the registry runs every row its supports() accepts.
#include <string>
#include <vector>

#include "case_builders.h"

namespace cnnrt::harness::cases {
namespace {

// --- conv --------------------------------------------------------------------------------------

class ConvSpec {
 public:
  ConvSpec(int c, int h, int w, int oc, int k) : c_(c), h_(h), w_(w) {
    a_.out_channels = oc;
    a_.kernel_h = a_.kernel_w = k;
  }
  ConvSpec& kernel(int kh, int kw) {
    a_.kernel_h = kh;
    a_.kernel_w = kw;
    return *this;
  }
  ConvSpec& stride(int s) {
    a_.stride_h = a_.stride_w = s;
    return *this;
  }
  ConvSpec& pad(int p) { return pad(p, p); }
  ConvSpec& pad(int ph, int pw) {
    a_.pad_h = ph;
    a_.pad_w = pw;
    return *this;
  }
  // Extra bottom / right padding (TF "SAME", ONNX pads).
  ConvSpec& pad_extra(int eh, int ew) {
    a_.pad_h_extra = eh;
    a_.pad_w_extra = ew;
    return *this;
  }
  ConvSpec& dilation(int d) {
    a_.dilation_h = a_.dilation_w = d;
    return *this;
  }
  ConvSpec& groups(int g) {
    a_.groups = g;
    return *this;
  }
  ConvSpec& no_bias() {
    bias_ = false;
    return *this;
  }
  ConvSpec& act(const Act& act) {
    act_ = act;
    return *this;
  }
  ConvSpec& pool(int k, int s, bool ceil = false, int pad = 0) {
    PoolAttrs p;
    p.kernel_h = p.kernel_w = k;
    p.stride_h = p.stride_w = s;
    p.pad_h = p.pad_w = pad;
    p.ceil_mode = ceil;
    pool_ = p;
    return *this;
  }
  // A fused residual (graph/passes.h fuse_conv_residual): a second input of the output's shape.
  ConvSpec& residual() {
    residual_ = true;
    return *this;
  }
  ConvSpec& tag(const char* tag) {
    tag_ = tag;
    return *this;
  }

  OpCase build(int batch) const {
    Node node = node_of(OpKind::Conv, {{c_, h_, w_}}, a_);
    act_.apply(node);
    node.fused_maxpool = pool_;
    if (residual_) {
      // The output shape is the graph's rule's; infer it once without the residual to size it.
      Node probe = node;
      infer_node_shape(probe, "harness");
      node.inputs.push_back("residual");
      node.input_shapes.push_back(probe.output_shape);
      node.fused_residual = true;
    }
    node.params.push_back(Param{"weight", "test.weight", {}});
    if (bias_) node.params.push_back(Param{"bias", "test.bias", {}});
    std::string name = tag_.empty() ? "" : tag_ + "_";
    name += "c" + std::to_string(c_) + "_h" + std::to_string(h_) + "_w" + std::to_string(w_) +
            "_oc" + std::to_string(a_.out_channels) + "_k" + std::to_string(a_.kernel_h) + "x" +
            std::to_string(a_.kernel_w);
    if (a_.stride_h != 1 || a_.stride_w != 1) name += "_s" + std::to_string(a_.stride_h);
    if (a_.pad_h != 0 || a_.pad_w != 0)
      name += "_p" + std::to_string(a_.pad_h) + "x" + std::to_string(a_.pad_w);
    if (!a_.symmetric_padding())
      name += "_extra" + std::to_string(a_.pad_h_extra) + "x" + std::to_string(a_.pad_w_extra);
    if (a_.dilation_h != 1) name += "_d" + std::to_string(a_.dilation_h);
    if (a_.groups != 1) name += "_g" + std::to_string(a_.groups);
    if (!bias_) name += "_nobias";
    if (residual_) name += "_res";
    name += act_.suffix();
    if (pool_)
      name += "_pool" + std::to_string(pool_->kernel_h) + "s" + std::to_string(pool_->stride_h) +
              (pool_->pad_h != 0 ? "p" + std::to_string(pool_->pad_h) : "") +
              (pool_->ceil_mode ? "ceil" : "");
    return make_case(name, node, batch);
  }

 private:
  int c_, h_, w_;
  ConvAttrs a_;
  bool bias_ = true;
  Act act_;
  std::optional<PoolAttrs> pool_;
  bool residual_ = false;
  std::string tag_;
};

}  // namespace

std::vector<OpCase> conv_cases() {
  std::vector<OpCase> cases;
  auto add = [&](const ConvSpec& spec, std::initializer_list<int> batches) {
    for (int batch : batches) cases.push_back(spec.build(batch));
  };
  add(ConvSpec(1, 13, 11, 7, 3).pad(1), {1, 3});
  add(ConvSpec(3, 17, 19, 8, 1), {1, 33});                                          // 1x1
  add(ConvSpec(7, 13, 17, 13, 1).kernel(1, 7).pad(0, 3), {3});                      // 1x7
  add(ConvSpec(3, 23, 29, 16, 7).stride(2).pad(3).act(kRelu), {1, 3});              // 7x7 stride 2
  add(ConvSpec(3, 31, 37, 24, 11).stride(4).pad(2).act(kRelu).pool(3, 2), {1, 3});  // 11x11
  add(ConvSpec(130, 7, 11, 65, 3).pad(1), {1});                                     // C = 130
  add(ConvSpec(7, 13, 13, 14, 3).stride(3), {3});                       // stride 3, padding 0
  add(ConvSpec(8, 19, 17, 16, 3).dilation(2).pad(2), {1, 3});           // dilation 2
  add(ConvSpec(12, 11, 13, 18, 3).pad(1).groups(3), {3});               // groups
  add(ConvSpec(32, 13, 11, 32, 3).pad(1).groups(32).act(kRelu6), {1});  // depthwise
  add(ConvSpec(7, 17, 13, 7, 5).stride(2).pad(2).groups(7), {3});       // depthwise, stride 2
  // Asymmetric padding (bottom 1 more than top): the extra row is what makes H 14 give 7 rows.
  add(ConvSpec(3, 14, 11, 8, 3).stride(2).pad(0, 1).pad_extra(1, 0).act(kClip), {1});
  add(ConvSpec(5, 7, 7, 3, 2).no_bias(), {3});  // even kernel, no bias
  add(ConvSpec(8, 15, 15, 8, 3).pad(1).act(kRelu6).pool(3, 2, true), {3});
  add(ConvSpec(16, 7, 5, 24, 3).pad(1).act(kRelu).pool(2, 2), {33});
  add(ConvSpec(64, 13, 13, 128, 3).pad(1).act(kRelu), {3});  // wgmma-eligible shape
  // Grids that fill an H100/H200: the wgmma entries run their own kernels, not the small-batch
  // fallback (conv_fp16_wgmma_ws takes no fused pool, hence the second row).  The pooled row is
  // also where the default conv_int8_tma runs its fused MaxPool (256x128 on paired rows:
  // tests/cuda/conv/test_tma_s8.cpp checks the plan).
  add(ConvSpec(64, 27, 27, 64, 3).pad(1).act(kRelu).pool(3, 2).tag("fill"), {33});
  add(ConvSpec(64, 27, 27, 64, 3).pad(1).act(kRelu).tag("fill"), {33});
  add(ConvSpec(64, 14, 14, 192, 1).act(kRelu6).tag("fill"), {90});  // wgmma, clamp epilogue
  // conv_fp16_wgmma's narrow tiles (channel-pruned AlexNet widths): BN = 32 with a fused pool,
  // BN = 96 with a fused pool, BN = 32 over five N tiles with a residual and a clamp.
  add(ConvSpec(48, 31, 31, 32, 3).act(kRelu).pool(3, 2).tag("fill"), {33});
  add(ConvSpec(16, 23, 23, 96, 5).pad(2).act(kRelu).pool(3, 2).tag("fill"), {33});
  add(ConvSpec(64, 14, 14, 160, 1).residual().act(kRelu6).tag("fill"), {90});
  // conv_fp16_tma (in_c % 64, out_c % 8; its pinned-tile entries run every tile at any batch,
  // the default one at batches that fill the GPU — the "fill" rows above): out_c far below the
  // tile (8, 24), not a multiple of it (72, 200), 1x1 / 3x3 / 5x5 / 3x5, stride 2 with padding 0
  // and TF-SAME (bottom/right only) padding, M never a multiple of 128, every epilogue form.
  add(ConvSpec(64, 7, 9, 8, 3).pad(1).act(kRelu6).tag("tma"), {1, 3});
  add(ConvSpec(128, 13, 13, 24, 1).tag("tma"), {3});
  add(ConvSpec(64, 27, 27, 72, 5).stride(2).pad(2).act(kRelu).tag("tma"), {1});
  add(ConvSpec(192, 13, 13, 200, 3).pad(1).residual().act(kRelu).tag("tma"), {3});
  add(ConvSpec(64, 7, 9, 192, 3).kernel(3, 5).pad(1, 2).tag("tma"), {3});
  add(ConvSpec(128, 13, 13, 72, 3).stride(2).pad_extra(1, 1).act(kRelu6).tag("tma"), {3});
  add(ConvSpec(64, 13, 13, 64, 1).stride(2).residual().tag("tma"), {1});
  add(ConvSpec(128, 7, 9, 24, 3).pad(1).residual().act(kClip).tag("tma"), {3});
  // conv_fp16_tma's and conv_int8_tma's fused MaxPool (tiles of whole pooled rows, crossing
  // images; the int8 one on its pinned 256x128 / 128x256 entries, int8 output — the fp32 output
  // pools staged — and conv_int8_tma_staged the staged form): AlexNet conv5 and conv2 shapes at
  // small width (13x13 pool 3/2; 27x27 5x5 pool 3/2), pool 2/2 on 9x11 (a conv row past the last
  // window), a padded pool (pad 1: windows clipped at every edge), a ceil-mode pool, identity
  // activation (negative values pooled) and out_c not a multiple of the tile.
  add(ConvSpec(256, 13, 13, 64, 3).pad(1).act(kRelu).pool(3, 2).tag("tma"), {1, 3});
  add(ConvSpec(64, 27, 27, 192, 5).pad(2).act(kRelu).pool(3, 2).tag("tma"), {1, 3});
  add(ConvSpec(64, 9, 11, 40, 3).pad(1).pool(2, 2).tag("tma"), {1, 3});
  add(ConvSpec(128, 13, 13, 200, 3).pad(1).act(kRelu6).pool(3, 2, false, 1).tag("tma"), {3});
  add(ConvSpec(64, 27, 27, 96, 3).pad(1).act(kClip).pool(3, 2, false, 1).tag("tma"), {1});
  add(ConvSpec(64, 9, 10, 24, 1).pool(3, 2, true).tag("tma"), {3});
  // conv_fp16_tma's 64-byte k-tile rows (in_c % 64 == 32: 32 channels per k-tile): the
  // channel-pruned AlexNet's conv2 (32 -> 96, 5x5, pool 3/2: every pinned tile fused, and the
  // staged form) and conv3 (96 -> 192: three 32-channel blocks per tap), stride 2 with a
  // residual under ReLU6, TF-SAME stride 2 under Clip into out_c 72, a 1x1 over 160 channels
  // without bias, and a grid that fills a 132-SM GPU (conv_fp16_tma itself past its fallback).
  add(ConvSpec(32, 27, 27, 96, 5).pad(2).act(kRelu).pool(3, 2).tag("tma64"), {1, 3});
  add(ConvSpec(96, 13, 13, 192, 3).pad(1).act(kRelu).tag("tma64"), {1, 3});
  add(ConvSpec(32, 9, 11, 40, 3).stride(2).pad(1).residual().act(kRelu6).tag("tma64"), {3});
  add(ConvSpec(96, 14, 13, 72, 3).stride(2).pad_extra(1, 1).act(kClip).tag("tma64"), {3});
  add(ConvSpec(160, 7, 9, 24, 1).no_bias().tag("tma64"), {3});
  add(ConvSpec(32, 27, 27, 96, 3).pad(1).act(kRelu).tag("tma64_fill"), {25});
  // int8 wgmma (conv_int8_wgmma*): a channel stride with padding lanes (13 -> 16), and the
  // space-to-depth stem at a batch whose 64-channel grid fills the GPU (conv_int8_s2d on wgmma).
  add(ConvSpec(13, 21, 19, 64, 3).stride(2).pad(1).act(kRelu), {3});
  add(ConvSpec(3, 63, 63, 64, 11).stride(4).pad(2).act(kRelu).pool(3, 2).tag("s2d_fill"), {76});
  // The space-to-depth stem's TMA form (x' at 64 channels, conv_fp16_tma / conv_int8_tma on
  // their BN = 64 tiles): conv1 of a channel-pruned AlexNet (32 out, half the CPU reference's
  // work) at the first batch whose TMA tiles fill a 132-SM GPU, so conv_fp16_s2d and
  // conv_int8_s2d take that form themselves (tests/cuda/conv/test_s2d_tma.cpp checks the batch);
  // the pinned conv_fp16_s2d_tma / conv_int8_s2d_tma run it on every s2d row.
  add(ConvSpec(3, 224, 224, 32, 11).stride(4).pad(2).act(kRelu).pool(3, 2).tag("s2d_tma"), {12});
  // int8 TMA (conv_int8_tma*, bit for bit; with the "tma" and AlexNet rows above): 192 channels
  // (three 64-byte k-tiles per tap) into 200 (padding lanes, two N tiles of 192), 128 channels
  // (128-byte k-tiles) 5x5 stride 2, 256 channels into 16 under Clip, 320 channels (five 64-byte
  // k-tiles) 1x1 with no padding into 48.
  add(ConvSpec(192, 13, 13, 200, 3).pad(1).act(kRelu).tag("tma_s8"), {3});
  add(ConvSpec(128, 9, 7, 48, 5).stride(2).pad(2).act(kRelu6).tag("tma_s8"), {1, 3});
  add(ConvSpec(256, 13, 13, 16, 3).pad(1).act(kClip).tag("tma_s8"), {1});
  add(ConvSpec(320, 7, 9, 48, 1).tag("tma_s8"), {3});
  // Fused residual (fuse_conv_residual): a block's last conv + add (+ activation); odd channels
  // (padding lanes of the residual), the 1x1 project conv of an MBConv block, a grid that fills
  // the GPU, depthwise rows for the depthwise kernel.
  add(ConvSpec(13, 11, 7, 21, 3).pad(1).residual().act(kRelu), {1, 3});
  add(ConvSpec(24, 9, 11, 40, 1).residual(), {3});
  add(ConvSpec(64, 27, 27, 64, 3).pad(1).residual().act(kRelu).tag("fill"), {33});
  add(ConvSpec(24, 15, 13, 24, 3).pad(1).groups(24).residual().act(kRelu6), {3});
  // Depthwise as EfficientNet has them (TF-SAME: stride 2 pads bottom/right one more), 5x5,
  // odd channels, dilation.
  add(ConvSpec(13, 9, 10, 13, 5).stride(2).pad(1, 2).pad_extra(1, 0).groups(13).act(kRelu6), {3});
  add(ConvSpec(144, 28, 28, 144, 3).stride(2).pad_extra(1, 1).groups(144).act(kRelu6), {3});
  add(ConvSpec(240, 14, 14, 240, 5).pad(2).groups(240).act(kRelu6), {2});
  add(ConvSpec(16, 13, 13, 16, 3).dilation(2).pad(2).groups(16).no_bias(), {1});
  // The two-row depthwise kernel's edges: 5x5 stride 1 with an odd output height (the last row
  // pair is half outside), asymmetric padding (first rows' taps above the image) and a residual.
  add(ConvSpec(19, 11, 9, 19, 5).pad(1, 2).pad_extra(2, 1).groups(19).residual().act(kRelu6), {3});
  // The staged depthwise kernel's other paths: a partial last row block with several column
  // tiles and a partial channel quad (264 = 8 blocks of 32 + 8), a residual under Clip at 5x5
  // stride 2, the rows shrunk to fit 48 KB (56 x 56 at stride 2), a residual without a clamp.
  add(ConvSpec(264, 9, 23, 264, 3).pad(1).groups(264).residual().act(kRelu6), {3});
  add(ConvSpec(40, 13, 15, 40, 5).stride(2).pad(2).pad_extra(1, 1).groups(40).residual().act(kClip),
      {3});
  add(ConvSpec(36, 56, 56, 36, 5).stride(2).pad(1).pad_extra(1, 1).groups(36), {1});
  add(ConvSpec(24, 15, 13, 24, 3).pad(1).groups(24).residual(), {3});
  // The staged int8 depthwise kernel (int8 entries take no residual, so none here): 3x3 and
  // 5x5 at stride 1 and 2, C = 40 (a group of 32 whose half past pad16 = 48 is zero-filled and
  // whose quads 40..47 are padding lanes) and 24, widths that leave a partial tile of 8 (19, 21,
  // 13, 27), asymmetric padding, several row blocks (57 rows), batch > 1.
  add(ConvSpec(40, 15, 19, 40, 3).pad(1).groups(40).act(kRelu6), {3});
  add(ConvSpec(24, 17, 21, 24, 3).stride(2).pad(0, 1).pad_extra(1, 0).groups(24), {2});
  add(ConvSpec(40, 23, 13, 40, 5).pad(2, 1).pad_extra(0, 2).groups(40).act(kClip), {3});
  add(ConvSpec(40, 29, 27, 40, 5).stride(2).pad(2).pad_extra(1, 1).groups(40).act(kRelu6), {2});
  add(ConvSpec(24, 57, 59, 24, 3).pad(1).groups(24).act(kRelu), {2});
  // The small-K int8 kernel (conv_int8_narrow: K = kh·kw·pad16(C) <= 160) on EfficientNet-Lite0's
  // narrow layers at small batches, M never a multiple of its 256-row tile: b1_expand (16 -> 96,
  // K = 16), the TF-SAME stem (3 -> 32, 3x3 stride 2, bottom/right padding 1: K = 144, 27 real),
  // b2/b3_expand (24 -> 144, K = 32), b0_project (32 -> 16), b1_project (96 -> 24, K = 96: an
  // fp32 output stride of 24 = three n8 tiles), b4_expand (40 -> 240, K = 48); then a 1x7 over 7
  // channels (K = 112), dilation with an odd channel count, and a positive lower clamp bound
  // with 12 padding lanes.  (Grids where each persistent CTA walks enough tiles to wrap its A
  // ring are in tests/cuda/conv/test_narrow_s8.cpp: too slow for the CPU entries here.)
  add(ConvSpec(16, 37, 29, 96, 1).act(kRelu6).tag("effnet_b1_expand"), {3});
  add(ConvSpec(16, 37, 29, 96, 1).tag("effnet_b1_expand"), {1});
  add(ConvSpec(3, 30, 34, 32, 3).stride(2).pad_extra(1, 1).act(kRelu6).tag("effnet_stem"), {2});
  add(ConvSpec(3, 31, 33, 32, 3).stride(2).pad(1).tag("effnet_stem"), {1});
  add(ConvSpec(24, 23, 19, 144, 1).act(kRelu6).tag("effnet_b2_expand"), {3});
  add(ConvSpec(32, 21, 17, 16, 1).tag("effnet_b0_project"), {3});
  add(ConvSpec(96, 13, 11, 24, 1).tag("effnet_b1_project"), {2});
  add(ConvSpec(40, 9, 7, 240, 1).act(kRelu6).tag("effnet_b4_expand"), {2});
  add(ConvSpec(7, 13, 17, 21, 1).kernel(1, 7).pad(0, 3).act(kRelu6), {2});
  add(ConvSpec(9, 19, 17, 24, 3).dilation(2).pad(1, 2).pad_extra(1, 0), {3});
  add(ConvSpec(16, 11, 13, 20, 1).act(kClipPositive), {3});
  // AlexNet (torchvision), fused as the passes fuse it.
  add(ConvSpec(3, 224, 224, 64, 11).stride(4).pad(2).act(kRelu).pool(3, 2).tag("alexnet1"), {1});
  add(ConvSpec(64, 27, 27, 192, 5).pad(2).act(kRelu).pool(3, 2).tag("alexnet2"), {1});
  add(ConvSpec(192, 13, 13, 384, 3).pad(1).act(kRelu).tag("alexnet3"), {1});
  add(ConvSpec(384, 13, 13, 256, 3).pad(1).act(kRelu).tag("alexnet4"), {1});
  add(ConvSpec(256, 13, 13, 256, 3).pad(1).act(kRelu).pool(3, 2).tag("alexnet5"), {1});
  return cases;
}

}  // namespace cnnrt::harness::cases
