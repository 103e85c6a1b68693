// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// What coded records (Options::compression) do to a store: how many sessions of forward-pass KV
// (bench/codec/forward_kv.py) one capacity holds with and without them, and what a restore of one
// costs (time, CPU, byte-exact). The file's KV is saved again and again as sessions of new token
// ids until the store has evicted the first ones; the sessions still whole are counted.
//
// Usage: kvtier_coded_store_bench KV_FILE --store DIR --layers L --tokens T [--heads 4]
//        [--head-dim 128] [--chunk 256] [--capacity-sessions 8] [--io direct|buffered]
// KV_FILE: [2, L, T, heads, head_dim] bf16 (forward_kv.py's kv-<L>L-<T>T.bin). One JSON line per
// compression setting.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/posix.hpp"
#include "kvtier/kvtier.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using kvtier::Compression;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct Args {
  std::string file, store, io = "direct";
  uint32_t layers = 0, heads = 4, head_dim = 128, chunk = 256;
  uint64_t tokens = 0;
  uint64_t capacity_sessions = 8;
};

std::vector<kvtier::Token> session_tokens(uint64_t session, uint64_t n) {
  std::vector<kvtier::Token> t(n);
  std::iota(t.begin(), t.end(), static_cast<kvtier::Token>(session * n));
  return t;
}

int run(const Args& a, std::vector<std::byte>& kv, Compression compression) {
  kvtier::KvGeometry g;
  g.model_id = "forward-kv";
  g.layers = a.layers;
  g.kv_heads = a.heads;
  g.kv_heads_total = a.heads;
  g.head_dim = a.head_dim;
  g.element_bytes = 2;
  g.chunk_tokens = a.chunk;
  const uint64_t raw = kv.size();
  const std::string dir = a.store + "/" + std::string(kvtier::compression_name(compression));
  std::filesystem::remove_all(dir);
  kvtier::Options o;
  o.root = dir;
  o.geometry = g;
  o.store_format = 2;
  o.max_tp = 1;
  o.compression = compression;
  o.tune = false;
  // Room for `capacity_sessions` raw sessions, in segments small beside it (eviction drops whole
  // segments, so a few large ones would make the count coarse).
  const uint64_t capacity = a.capacity_sessions * raw;
  o.segment_bytes = std::max<uint64_t>(16 << 20, capacity / 64 / 4096 * 4096);
  o.capacity_bytes = capacity + 2 * o.segment_bytes;
  o.io_path = a.io == "buffered" ? kvtier::IoPath::kBuffered : kvtier::IoPath::kDirect;
  auto engine = kvtier::Engine::open(o);
  if (!engine) {
    std::fprintf(stderr, "coded_store_bench: %s\n", engine.error().to_string().c_str());
    return 1;
  }
  kvtier::Engine& e = **engine;
  const kvtier::ChunkedKv source{{kv.data(), kv.size(), kvtier::MemoryKind::kHost, 0}, a.tokens};
  const uint64_t sessions = 3 * a.capacity_sessions;
  uint64_t stored_first = 0;
  double save_s = 0, save_cpu = 0;
  for (uint64_t s = 0; s < sessions; ++s) {
    const auto tokens = session_tokens(s, a.tokens);
    const double c = cpu_seconds();
    const auto t = Clock::now();
    auto saved = e.save(tokens, source);
    save_s += seconds_since(t);
    save_cpu += cpu_seconds() - c;
    if (!saved) {
      std::fprintf(stderr, "coded_store_bench: save %llu: %s\n", static_cast<unsigned long long>(s),
                   saved.error().to_string().c_str());
      return 1;
    }
    if (s == 0) stored_first = saved->bytes_written;
  }
  uint64_t held = 0, last = 0;
  for (uint64_t s = 0; s < sessions; ++s) {
    auto n = e.lookup(session_tokens(s, a.tokens));
    if (n && *n == a.tokens) {
      ++held;
      last = s;
    }
  }
  // A restore of a held session, from the drive (the page cache dropped where the I/O path uses
  // it is the caller's job: run with --io direct).
  std::vector<std::byte> back(raw, std::byte{0});
  const kvtier::ChunkedKv dest{{back.data(), back.size(), kvtier::MemoryKind::kHost, 0}, a.tokens};
  const double c = cpu_seconds();
  const auto t = Clock::now();
  auto restored = e.restore(session_tokens(last, a.tokens), dest);
  const double restore_s = seconds_since(t);
  const double restore_cpu = cpu_seconds() - c;
  if (!restored) {
    std::fprintf(stderr, "coded_store_bench: restore: %s\n", restored.error().to_string().c_str());
    return 1;
  }
  const bool exact = restored->tokens_restored == a.tokens && back == kv;
  nlohmann::json j = {
      {"compression", kvtier::compression_name(compression)},
      {"file", a.file},
      {"raw_session_bytes", raw},
      {"stored_session_bytes", stored_first},
      {"ratio", static_cast<double>(raw) / static_cast<double>(stored_first)},
      {"capacity_bytes", o.capacity_bytes},
      {"segment_bytes", o.segment_bytes},
      {"sessions_saved", sessions},
      {"sessions_held", held},
      {"save_s_per_session", save_s / static_cast<double>(sessions)},
      {"save_cpu_s_per_gb", save_cpu / (static_cast<double>(sessions * raw) / 1e9)},
      {"restore_s", restore_s},
      {"restore_kv_gb_per_s", static_cast<double>(raw) / 1e9 / restore_s},
      {"restore_bytes_read", restored->bytes_read},
      {"restore_cpu_s_per_gb", restore_cpu / (static_cast<double>(raw) / 1e9)},
      {"io", a.io},
      {"byte_exact", exact},
  };
  std::printf("%s\n", j.dump().c_str());
  std::filesystem::remove_all(dir);
  return exact ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"Sessions a capacity holds, and a restore's cost, with and without coded records"};
  app.add_option("file", a.file, "forward_kv.py's KV file")->required();
  app.add_option("--store", a.store, "Directory for the stores (made and removed)")->required();
  app.add_option("--layers", a.layers, "Layers of the file's KV")->required();
  app.add_option("--tokens", a.tokens, "Tokens of the file's KV")->required();
  app.add_option("--heads", a.heads, "KV heads");
  app.add_option("--head-dim", a.head_dim, "Head size");
  app.add_option("--chunk", a.chunk, "Tokens per record");
  app.add_option("--capacity-sessions", a.capacity_sessions,
                 "Capacity as this many sessions' raw bytes");
  app.add_option("--io", a.io, "direct or buffered")->check(CLI::IsMember({"direct", "buffered"}));
  CLI11_PARSE(app, argc, argv);
  const auto text = kvtier::read_file(a.file);
  if (!text) {
    std::fprintf(stderr, "coded_store_bench: %s\n", text.error().to_string().c_str());
    return 2;
  }
  std::vector<std::byte> kv(text->size());
  std::memcpy(kv.data(), text->data(), text->size());
  const uint64_t want = 2ull * a.layers * a.tokens * a.heads * a.head_dim * 2;
  if (kv.size() != want) {
    std::fprintf(stderr, "coded_store_bench: %s holds %zu bytes, not the %llu of its shape\n",
                 a.file.c_str(), kv.size(), static_cast<unsigned long long>(want));
    return 2;
  }
  int rc = 0;
  for (Compression c : {Compression::kOff, Compression::kSplit16}) rc |= run(a, kv, c);
  return rc;
}
