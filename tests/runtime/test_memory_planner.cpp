// plan_memory: hand-computed placements, alias legality, error cases, a property test over many
// random DAG-like request sets (no live overlap, alignment, lower bound ≤ arena ≤ aligned
// naive sum, aliases only when legal), sequential chains reaching the lower bound, and the
// AlexNet fused-graph activations at batch 1 and 64.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "cnnrt/error.h"
#include "runtime/memory_planner.h"

namespace cnnrt {
namespace {

PlanRequest request(const std::string& name, size_t bytes, int first, int last,
                    const std::string& may_alias = "") {
  PlanRequest r;
  r.name = name;
  r.bytes = bytes;
  r.first_step = first;
  r.last_step = last;
  r.may_alias = may_alias;
  return r;
}

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Follows `aliases` links to the tensor that owns the storage.
std::string storage_root(const MemoryPlan& plan, std::string name) {
  for (const PlannedTensor* t = plan.find(name); t != nullptr && !t->aliases.empty();
       t = plan.find(name))
    name = t->aliases;
  return name;
}

// Independent recomputation: for every step, bytes of distinct storage blocks live there.
size_t recomputed_lower_bound(const MemoryPlan& plan) {
  std::map<std::string, std::pair<int, int>> life;  // root -> [first, last] union
  std::map<std::string, size_t> bytes;
  for (const PlannedTensor& t : plan.tensors) {
    const std::string root = storage_root(plan, t.name);
    auto it = life.find(root);
    if (it == life.end()) {
      life[root] = {t.first_step, t.last_step};
    } else {
      it->second.first = std::min(it->second.first, t.first_step);
      it->second.second = std::max(it->second.second, t.last_step);
    }
    bytes[root] = t.bytes;
  }
  int last_step = 0;
  for (const auto& [root, span] : life) last_step = std::max(last_step, span.second);
  size_t best = 0;
  for (int step = 0; step <= last_step; ++step) {
    size_t live = 0;
    for (const auto& [root, span] : life)
      if (span.first <= step && step <= span.second) live += bytes[root];
    best = std::max(best, live);
  }
  return best;
}

// Every invariant the planner promises, checked from the plan alone plus the requests.
void check_plan_invariants(const std::vector<PlanRequest>& requests, const MemoryPlan& plan,
                           size_t alignment) {
  ASSERT_EQ(plan.tensors.size(), requests.size());
  size_t naive = 0;
  std::map<std::string, const PlanRequest*> by_name;
  for (const PlanRequest& r : requests) by_name[r.name] = &r;
  for (size_t i = 0; i < requests.size(); ++i) {
    const PlannedTensor& t = plan.tensors[i];
    const PlanRequest& r = requests[i];
    naive += r.bytes;
    EXPECT_EQ(t.name, r.name);
    EXPECT_EQ(t.bytes, r.bytes);
    EXPECT_EQ(t.first_step, r.first_step);
    EXPECT_EQ(t.last_step, r.last_step);
    EXPECT_EQ(t.offset % alignment, 0u) << t.name;
    EXPECT_LE(t.offset + t.bytes, plan.arena_bytes) << t.name;
    if (!t.aliases.empty()) {
      // Only the requested alias, and only when legal: same size, the target is read for the
      // last time at the step that writes this tensor, same storage.
      EXPECT_EQ(t.aliases, r.may_alias) << t.name;
      const PlanRequest& target = *by_name.at(t.aliases);
      EXPECT_EQ(target.bytes, r.bytes) << t.name;
      EXPECT_EQ(target.last_step, r.first_step) << t.name;
      EXPECT_EQ(plan.find(t.aliases)->offset, t.offset) << t.name;
    }
  }
  EXPECT_EQ(plan.naive_bytes, naive);
  for (size_t i = 0; i < plan.tensors.size(); ++i)
    for (size_t j = i + 1; j < plan.tensors.size(); ++j) {
      const PlannedTensor& a = plan.tensors[i];
      const PlannedTensor& b = plan.tensors[j];
      const int shared_first = std::max(a.first_step, b.first_step);
      const int shared_last = std::min(a.last_step, b.last_step);
      if (shared_first > shared_last || a.bytes == 0 || b.bytes == 0) continue;
      if (storage_root(plan, a.name) == storage_root(plan, b.name)) {
        // Sharing storage while both live is only the in-place hand-over step itself.
        EXPECT_TRUE(a.aliases == b.name || b.aliases == a.name) << a.name << " / " << b.name;
        EXPECT_EQ(shared_first, shared_last) << a.name << " / " << b.name;
        continue;
      }
      const bool disjoint = a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset;
      EXPECT_TRUE(disjoint) << a.name << " [" << a.offset << ", +" << a.bytes << ") and " << b.name
                            << " [" << b.offset << ", +" << b.bytes << ") are both live at step "
                            << shared_first;
    }
  EXPECT_EQ(plan.lower_bound_bytes, recomputed_lower_bound(plan));
  EXPECT_GE(plan.arena_bytes, plan.lower_bound_bytes);
  size_t aligned_storage = 0;  // placing every block side by side would need this much
  for (const PlannedTensor& t : plan.tensors)
    if (t.aliases.empty()) aligned_storage += align_up(t.bytes, alignment);
  EXPECT_LE(plan.arena_bytes, aligned_storage);
}

TEST(MemoryPlanner, HandComputedChainPlacement) {
  // Largest first: c (300) at 0; b (200) is live with c at step 2 -> at align_up(300) = 512;
  // a (100) overlaps only b -> 0.  Lower bound: step 2 holds b + c = 500.
  const std::vector<PlanRequest> requests = {request("a", 100, 0, 1), request("b", 200, 1, 2),
                                             request("c", 300, 2, 3)};
  const MemoryPlan plan = plan_memory(requests, 256);
  EXPECT_EQ(plan.find("a")->offset, 0u);
  EXPECT_EQ(plan.find("b")->offset, 512u);
  EXPECT_EQ(plan.find("c")->offset, 0u);
  EXPECT_EQ(plan.arena_bytes, 712u);
  EXPECT_EQ(plan.naive_bytes, 600u);
  EXPECT_EQ(plan.lower_bound_bytes, 500u);
  EXPECT_EQ(plan.alignment, 256u);
  EXPECT_EQ(plan.find("missing"), nullptr);
  check_plan_invariants(requests, plan, 256);
}

TEST(MemoryPlanner, MergesLegalInPlaceChainAndCountsItOnce) {
  // conv -> relu (in place) -> flatten (view) -> fc
  const std::vector<PlanRequest> requests = {
      request("input", 512, 0, 0), request("conv", 1024, 0, 1), request("relu", 1024, 1, 2, "conv"),
      request("flat", 1024, 2, 3, "relu"), request("fc", 256, 3, 3)};
  const MemoryPlan plan = plan_memory(requests, 256);
  EXPECT_EQ(plan.find("relu")->aliases, "conv");
  EXPECT_EQ(plan.find("flat")->aliases, "relu");
  EXPECT_TRUE(plan.find("conv")->aliases.empty());
  EXPECT_EQ(plan.find("relu")->offset, plan.find("conv")->offset);
  EXPECT_EQ(plan.find("flat")->offset, plan.find("conv")->offset);
  // Step 0: input + conv = 1536; steps 1-2: the merged block alone; step 3: block + fc = 1280.
  EXPECT_EQ(plan.lower_bound_bytes, 1536u);
  EXPECT_EQ(plan.arena_bytes, 1536u);
  EXPECT_EQ(plan.naive_bytes, 512u + 3 * 1024u + 256u);
  check_plan_invariants(requests, plan, 256);
}

TEST(MemoryPlanner, RefusesIllegalAliases) {
  const std::vector<PlanRequest> requests = {
      request("input", 768, 0, 2),
      request("x", 768, 0, 1, "input"),  // input still read at step 2
      request("y", 512, 1, 2, "x"),      // different size
      request("p", 256, 2, 3),
      request("q", 256, 3, 4, "p"),     // legal: p's last use is step 3
      request("r", 256, 3, 4, "p"),     // second in-place writer of p at the same step
      request("late", 256, 5, 5, "q"),  // q's last use is step 4, not 5
  };
  const MemoryPlan plan = plan_memory(requests, 256);
  EXPECT_TRUE(plan.find("x")->aliases.empty());
  EXPECT_TRUE(plan.find("y")->aliases.empty());
  EXPECT_EQ(plan.find("q")->aliases, "p");
  EXPECT_TRUE(plan.find("r")->aliases.empty());
  EXPECT_TRUE(plan.find("late")->aliases.empty());
  check_plan_invariants(requests, plan, 256);
}

TEST(MemoryPlanner, RejectsInconsistentRequests) {
  EXPECT_THROW(plan_memory({request("a", 8, 2, 1)}), Error);   // first > last
  EXPECT_THROW(plan_memory({request("a", 8, -1, 1)}), Error);  // negative step
  EXPECT_THROW(plan_memory({request("a", 8, 0, 1), request("a", 8, 1, 2)}), Error);  // duplicate
  EXPECT_THROW(plan_memory({request("a", 8, 0, 1, "nope")}), Error);  // unknown alias
  EXPECT_THROW(plan_memory({request("a", 8, 0, 1, "a")}), Error);     // self alias
  EXPECT_THROW(plan_memory({request("", 8, 0, 1)}), Error);           // no name
  EXPECT_THROW(plan_memory({request("a", 8, 0, 1)}, 0), Error);       // zero alignment
  try {
    plan_memory({request("a", 8, 0, 1), request("b", 8, 3, 2)});
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'b'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(plan_memory({}).arena_bytes, 0u);
}

// Random DAG-like schedules: one node per step writes one tensor, read by 1-3 later steps;
// about a third of the tensors ask to alias an earlier one, some legally, some not.
std::vector<PlanRequest> random_requests(std::mt19937& rng) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int count = uniform(1, 40);
  std::vector<PlanRequest> requests;
  int step = 0;
  for (int i = 0; i < count; ++i) {
    step += uniform(0, 1);
    PlanRequest r = request("t" + std::to_string(i), uniform(0, 6) == 0 ? 0 : uniform(1, 5000),
                            step, step + uniform(0, 4));
    if (i > 0 && uniform(0, 2) == 0) {
      PlanRequest& target = requests[uniform(0, i - 1)];
      r.may_alias = target.name;
      if (uniform(0, 1) == 0 && target.first_step <= r.first_step) {
        // Make it legal as far as the pair goes: same size, hand-over at this step.
        r.bytes = target.bytes;
        target.last_step = r.first_step;
      }
    }
    requests.push_back(r);
  }
  std::shuffle(requests.begin(), requests.end(), rng);  // request order must not matter
  return requests;
}

TEST(MemoryPlanner, RandomRequestSetsKeepEveryInvariant) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("random seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  int merged = 0;
  for (int iteration = 0; iteration < 500; ++iteration) {
    const size_t alignment = size_t{1} << std::uniform_int_distribution<int>(0, 9)(rng);
    const std::vector<PlanRequest> requests = random_requests(rng);
    const MemoryPlan plan = plan_memory(requests, alignment);
    SCOPED_TRACE("iteration " + std::to_string(iteration) + "\n" + plan.to_table());
    check_plan_invariants(requests, plan, alignment);
    for (const PlannedTensor& t : plan.tensors) merged += t.aliases.empty() ? 0 : 1;
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(merged, 0) << "the generator should produce some legal aliases";
}

TEST(MemoryPlanner, SequentialChainsReachTheLowerBound) {
  // Per-sample activation sizes of sequential CNNs (bytes, multiples of the alignment), each
  // tensor written at step i and read at step i + 1.
  const std::vector<std::vector<size_t>> chains = {
      {602112, 774400, 186624, 559872, 129792, 259584, 173056, 173056, 36864, 16384, 16384, 4096},
      {256, 8192, 8192, 4096, 4096, 2048, 1024, 512, 256},
      {1024, 512, 2048, 256, 4096, 768, 1280}};
  for (const std::vector<size_t>& sizes : chains) {
    std::vector<PlanRequest> requests;
    for (size_t i = 0; i < sizes.size(); ++i)
      requests.push_back(request("t" + std::to_string(i), sizes[i], static_cast<int>(i),
                                 static_cast<int>(std::min(i + 1, sizes.size() - 1))));
    const MemoryPlan plan = plan_memory(requests, 256);
    check_plan_invariants(requests, plan, 256);
    EXPECT_EQ(plan.arena_bytes, plan.lower_bound_bytes) << plan.to_table();
  }
}

std::vector<PlanRequest> alexnet_fused_requests(int batch) {
  const size_t f = sizeof(float) * static_cast<size_t>(batch);
  return {
      request("input", f * 3 * 224 * 224, 0, 0),
      request("conv1", f * 64 * 27 * 27, 0, 1),  // conv1+relu1+pool1
      request("conv2", f * 192 * 13 * 13, 1, 2),
      request("conv3", f * 384 * 13 * 13, 2, 3),
      request("conv4", f * 256 * 13 * 13, 3, 4),
      request("conv5", f * 256 * 6 * 6, 4, 5),  // conv5+relu5+pool5
      request("avgpool", f * 256 * 6 * 6, 5, 6),
      request("flatten", f * 9216, 6, 7, "avgpool"),
      request("fc6", f * 4096, 7, 8),
      request("fc7", f * 4096, 8, 9),
      request("fc8", f * 1000, 9, 9),
  };
}

TEST(MemoryPlanner, AlexNetFusedGraphIsWithinFivePercentOfLowerBound) {
  for (int batch : {1, 64}) {
    const std::vector<PlanRequest> requests = alexnet_fused_requests(batch);
    const MemoryPlan plan = plan_memory(requests, 256);
    SCOPED_TRACE("batch " + std::to_string(batch) + "\n" + plan.to_table());
    check_plan_invariants(requests, plan, 256);
    EXPECT_EQ(plan.find("flatten")->aliases, "avgpool");
    EXPECT_LE(static_cast<double>(plan.arena_bytes), 1.05 * plan.lower_bound_bytes);
    // The peak is step 0: the input image and conv1's pooled output.
    EXPECT_EQ(plan.lower_bound_bytes, sizeof(float) * batch * (3 * 224 * 224 + 64 * 27 * 27));
  }
}

TEST(MemoryPlanner, TableAndJsonDescribeThePlan) {
  const std::vector<PlanRequest> requests = alexnet_fused_requests(1);
  const MemoryPlan plan = plan_memory(requests, 256);
  const std::string table = plan.to_table();
  for (const PlanRequest& r : requests) EXPECT_NE(table.find(r.name), std::string::npos) << r.name;
  EXPECT_NE(table.find("arena_bytes " + std::to_string(plan.arena_bytes)), std::string::npos);
  EXPECT_NE(table.find("lower_bound_bytes " + std::to_string(plan.lower_bound_bytes)),
            std::string::npos);
  EXPECT_NE(table.find("naive_bytes " + std::to_string(plan.naive_bytes)), std::string::npos);

  const nlohmann::json json = nlohmann::json::parse(plan.to_json());
  EXPECT_EQ(json.at("arena_bytes").get<size_t>(), plan.arena_bytes);
  EXPECT_EQ(json.at("naive_bytes").get<size_t>(), plan.naive_bytes);
  EXPECT_EQ(json.at("lower_bound_bytes").get<size_t>(), plan.lower_bound_bytes);
  EXPECT_EQ(json.at("alignment").get<size_t>(), 256u);
  ASSERT_EQ(json.at("tensors").size(), plan.tensors.size());
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const nlohmann::json& t = json.at("tensors")[i];
    EXPECT_EQ(t.at("name").get<std::string>(), plan.tensors[i].name);
    EXPECT_EQ(t.at("bytes").get<size_t>(), plan.tensors[i].bytes);
    EXPECT_EQ(t.at("offset").get<size_t>(), plan.tensors[i].offset);
    EXPECT_EQ(t.at("first_step").get<int>(), plan.tensors[i].first_step);
    EXPECT_EQ(t.at("last_step").get<int>(), plan.tensors[i].last_step);
    EXPECT_EQ(t.at("aliases").get<std::string>(), plan.tensors[i].aliases);
  }
}

}  // namespace
}  // namespace cnnrt
