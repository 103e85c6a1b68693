// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// What a hybrid model's lookup costs through a Redis Cluster: node A saves one long session
// (full-attention KV, the last window's sliding-window records, the state), node B, whose store
// holds nothing, looks the same prompt up: keys asked of the cluster (remote_probes) and time per
// lookup. Key counts, not bytes, set the cost, so the KV is narrow (two heads of 8 dims).
// Start a cluster first (bench/remote/start_cluster.sh); prints one JSON line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "kvtier/engine.hpp"

namespace fs = std::filesystem;
using namespace kvtier;

namespace {

struct Args {
  std::string remote, dir = "/tmp/kvtier-hybrid-lookup";
  uint64_t tokens = 100000;
  uint32_t chunk = 256, window = 4096, window_chunk = 16, groups = 2, state_layers = 1;
  int repeat = 5;
};

KvGeometry geometry(const Args& a) {
  KvGeometry g;
  g.model_id = "hybrid-lookup-bench";
  // Full attention and sliding window alternating, four layers.
  g.layer_kinds = {LayerKind::kFullAttention, LayerKind::kSlidingWindow, LayerKind::kFullAttention,
                   LayerKind::kSlidingWindow};
  g.layers = static_cast<uint32_t>(g.layer_kinds.size());
  g.kv_heads = a.groups;
  g.kv_heads_total = a.groups;
  g.head_dim = 8;
  g.element_bytes = 2;
  g.chunk_tokens = a.chunk;
  g.window_tokens = a.window;
  g.window_chunk_tokens = a.window_chunk;
  g.state_layers = a.state_layers;
  g.state_bytes = a.state_layers > 0 ? 4096 : 0;
  return g;
}

std::unique_ptr<Engine> open_node(const Args& a, const std::string& root) {
  Options o;
  o.root = root;
  o.geometry = geometry(a);
  o.store_format = 2;
  o.max_tp = a.groups;
  o.capacity_bytes = uint64_t{8} << 30;
  o.segment_bytes = 64 << 20;
  o.tune = false;
  o.remote.seeds = a.remote;
  auto e = Engine::open(o);
  if (!e) {
    std::fprintf(stderr, "open %s: %s\n", root.c_str(), e.error().message().c_str());
    std::exit(1);
  }
  return std::move(*e);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"Keys and time of a hybrid model's lookup through a Redis Cluster"};
  app.add_option("--remote", a.remote, "the cluster's seeds, redis://127.0.0.1:P,...")->required();
  app.add_option("--dir", a.dir, "scratch directory for both nodes' stores (emptied)");
  app.add_option("--tokens", a.tokens, "tokens of the session and the prompt");
  app.add_option("--chunk", a.chunk, "tokens per full-attention record");
  app.add_option("--window", a.window, "sliding window, tokens");
  app.add_option("--window-chunk", a.window_chunk, "tokens per window record");
  app.add_option("--groups", a.groups, "KV heads, one head group each");
  app.add_option("--state-layers", a.state_layers, "recurrent layers (0: window only)");
  app.add_option("--repeat", a.repeat, "lookups timed");
  CLI11_PARSE(app, argc, argv);

  fs::remove_all(a.dir);
  fs::create_directories(a.dir);
  const KvGeometry g = geometry(a);
  std::mt19937_64 rng(1);
  std::vector<Token> tokens(a.tokens);
  for (auto& t : tokens) t = static_cast<Token>(rng() % 50000);
  std::vector<std::byte> kv(g.bytes_for_tokens(a.tokens));
  for (auto& b : kv) b = static_cast<std::byte>(rng());
  std::vector<std::byte> state(uint64_t{g.state_layers} * g.state_bytes);
  StateMemory sv;
  for (uint32_t l = 0; l < g.state_layers; ++l)
    sv.layers.push_back({state.data() + l * g.state_bytes, g.state_bytes, MemoryKind::kHost, 0});
  {
    auto node_a = open_node(a, a.dir + "/a");
    const ChunkedKv source{{kv.data(), kv.size(), MemoryKind::kHost, 0}, a.tokens};
    auto saved =
        g.state_layers > 0 ? node_a->save(tokens, source, sv) : node_a->save(tokens, source);
    if (!saved) {
      std::fprintf(stderr, "save: %s\n", saved.error().message().c_str());
      return 1;
    }
    node_a->wait_remote();
  }
  auto node_b = open_node(a, a.dir + "/b");
  std::vector<double> ms;
  uint64_t held = 0, probes = 0;
  for (int i = 0; i < a.repeat; ++i) {
    const uint64_t before = node_b->stats().remote_probes;
    const auto t0 = std::chrono::steady_clock::now();
    auto found = node_b->lookup(tokens);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!found) {
      std::fprintf(stderr, "lookup: %s\n", found.error().message().c_str());
      return 1;
    }
    held = *found;
    probes = node_b->stats().remote_probes - before;
  }
  std::sort(ms.begin(), ms.end());
  nlohmann::json out = {{"tokens", a.tokens},
                        {"chunk", a.chunk},
                        {"window", a.window},
                        {"window_chunk", a.window_chunk},
                        {"groups", a.groups},
                        {"state_layers", a.state_layers},
                        {"hit_tokens", held},
                        {"probes_per_lookup", probes},
                        {"lookup_ms_median", ms[ms.size() / 2]},
                        {"lookup_ms_min", ms.front()}};
  std::printf("%s\n", out.dump().c_str());
  node_b.reset();
  fs::remove_all(a.dir);
  return 0;
}
