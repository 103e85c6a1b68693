// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "rank_worker.hpp"

#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_kv.hpp"
#include "raw_get.hpp"
#include "synthetic.hpp"

namespace kvtier::seed {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// This process's CPU time, every thread: what kvtier costs a node per restore.
double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

class Worker {
 public:
  explicit Worker(const RankArgs& args) : args_(args) {}

  Json start() {
    auto g = geometry_for(args_.store.model, args_.store.tp_rank, args_.store.tp_world,
                          args_.store.chunk_tokens);
    if (!g) return error(g.error());
    geometry_ = *g;
    auto source = load_kv_source(args_.kv);
    if (!source) return error(source.error());
    source_ = std::move(*source);
    auto kv = BenchKv::create(geometry_, args_.max_tokens, args_.device, args_.gpu, source_);
    if (!kv) return error(kv.error());
    kv_ = std::move(*kv);
    return Json{{"ok", true},
                {"device", kv_->describe()},
                {"pci_bus_id", kv_->pci_bus_id()},
                {"pid", ::getpid()},
                {"kv_bytes_per_token", geometry_.bytes_per_token()}};
  }

  Json handle(const Json& cmd) {
    const std::string op = cmd.value("op", "");
    if (op.ends_with("_many")) return handle_many(op, cmd);
    if (op == "open" || op == "open_local") return open(cmd, op == "open_local");
    if (op == "poison") return done(single().poison());
    // "engine": "local" picks the second engine (open_local) where both are open.
    std::unique_ptr<Engine>& engine = cmd.value("engine", "") == "local" ? local_ : engine_;
    if (op == "drop") return engine ? done(engine->drop_page_cache()) : Json{{"ok", true}};
    if (!engine) return error({ErrorCode::kInvalidArgument, fmt::format("'{}' before 'open'", op)});
    const auto ids =
        synthetic::tokens(cmd.value("seed", uint64_t{0}), cmd.value("tokens", uint64_t{0}));
    if (op == "prefill_save") return prefill_save(*engine, ids);
    if (op == "restore") return restore(*engine, ids, ids.size());
    if (op == "remote_drain") return remote_drain(*engine);
    if (op == "remote_ceiling") return remote_ceiling(ids);
    if (op == "warm") {  // first-use costs (CUDA, pinned staging, cuFile, the copy buffers) outside
                         // windows
      if (auto c = single().copy_ceiling(0); !c) return error(c.error());
      return restore(*engine, ids, std::min<size_t>(ids.size(), geometry_.chunk_tokens));
    }
    if (op == "check") {
      auto bad = single().first_mismatch(ids);
      if (!bad) return error(bad.error());
      return Json{{"ok", true}, {"exact", *bad == ids.size()}, {"first_bad_token", *bad}};
    }
    if (op == "copy_ceiling") {  // the link a DRAM-tier restore of this session crosses
      auto c = single().copy_ceiling(geometry_.bytes_for_tokens(ids.size()));
      if (!c) return error(c.error());
      return Json{{"ok", true}, {"seconds", *c}, {"what", single().copy_ceiling_name()}};
    }
    if (op == "ceiling") {
      auto c = engine_->measure_read_ceiling(ids);
      if (!c) return error(c.error());
      return Json{{"ok", true}, {"bytes", c->bytes}, {"seconds", c->seconds}};
    }
    if (op == "extents") {  // for fio: the file ranges this rank's restore of the session reads
      auto x = engine_->read_extents(ids);
      if (!x) return error(x.error());
      Json list = Json::array();
      for (const FileExtent& e : *x) list.push_back({e.path, e.offset, e.length});
      return Json{{"ok", true}, {"extents", list}, {"request_bytes", request_bytes_}};
    }
    return error({ErrorCode::kInvalidArgument, fmt::format("unknown op '{}'", op)});
  }

 private:
  static Json error(const Status& st) {
    return Json{{"ok", false}, {"error", st.to_string()}, {"code", static_cast<int>(st.code())}};
  }
  static Json done(const Status& st) { return st.ok() ? Json{{"ok", true}} : error(st); }

  // "open": the engine of --store, with the remote tier when "remote" is true ("promote": false
  // keeps cluster hits out of the local store, so every restore of a session reads the cluster).
  // "open_local" (local=true): a second engine on a store of its own (each --store directory plus
  // "-local"), never remote, for the same sessions restored from this node's drive.
  Json open(const Json& cmd, bool local) {
    std::unique_ptr<Engine>& slot = local ? local_ : engine_;
    slot.reset();  // one engine per rank store at a time (the store is locked)
    cli::StoreFlags flags = args_.store;
    flags.io = cmd.value("path", "direct");
    if (local) {
      std::string roots;
      std::stringstream in(flags.root);
      for (std::string dir; std::getline(in, dir, ',');)
        roots += (roots.empty() ? "" : ",") + dir + "-local";
      flags.root = roots;
    }
    if (local || !cmd.value("remote", false)) flags.remote.clear();
    auto options = flags.options(true);
    if (!options) return error(options.error());
    options->dram_bytes = cmd.value("dram_bytes", uint64_t{0});
    // A hit that would pass the promotion queue's byte bound is served, not promoted: one byte
    // (0 is refused) passes every record.
    if (!cmd.value("promote", true)) options->remote.queue_bytes = 1;
    if (auto r = options->resolved()) {
      request_bytes_ = r->io_request_bytes;
      if (!local) options_ = *r;
    }
    auto engine = Engine::open(*options);
    if (!engine) return error(engine.error());
    slot = std::move(*engine);
    // The sizes the engine took: the options', or its drives' tuning (probed at this open when a
    // drive holds enough and was not tuned yet).
    const IoSettings io = slot->io_settings();
    request_bytes_ = io.request_bytes;
    if (!local) {
      options_.io_request_bytes = io.request_bytes;
      options_.staging_bytes = io.staging_bytes;
    }
    const Stats s = slot->stats();
    return Json{{"ok", true},
                {"io_engine", s.io_engine},
                {"fallback", s.io_fallback},
                {"remote", s.remote},
                {"io_settings_from", io.source},
                {"request_bytes", io.request_bytes},
                {"staging_bytes", io.staging_bytes},
                {"connections_per_node", options_.remote.connections_per_node}};
  }

  /// Waits until everything saved so far has been written behind to the cluster (or dropped or
  /// failed, which the reply counts).
  Json remote_drain(Engine& engine) {
    const auto t0 = Clock::now();
    Stats s = engine.stats();
    while (s.remote_pending > 0) {
      if (since(t0) > 3600)
        return error({ErrorCode::kIo, "remote_drain: write-behind still pending after an hour"});
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      s = engine.stats();
    }
    return Json{{"ok", true},
                {"seconds", since(t0)},
                {"remote", s.remote},
                {"remote_writes", s.remote_writes},
                {"remote_write_drops", s.remote_write_drops},
                {"remote_write_errors", s.remote_write_errors}};
  }

  /// The raw GET ceiling (raw_get.hpp) on exactly the keys a restore of `ids` asks for, with the
  /// engine's connections per node and bytes in flight: two batches of half the staging pool.
  Json remote_ceiling(std::span<const Token> ids) {
    auto keys = engine_->remote_keys(ids);
    if (!keys) return error(keys.error());
    if (!raw_) {
      shared::RawGetConfig config{args_.store.remote, remote_password(),
                                  options_.remote.connections_per_node};
      auto raw = shared::RawGet::create(config);
      if (!raw) return error(raw.error());
      raw_ = std::move(*raw);
    }
    const uint64_t value = keys->empty() ? 1 : keys->front().value_bytes;
    const uint64_t batch = std::max<uint64_t>(1, options_.staging_bytes / 2 / value);
    auto r = raw_->run(*keys, 2 * batch);
    if (!r) return error(r.error());
    return Json{{"ok", true},          {"seconds", r->seconds},         {"bytes", r->bytes},
                {"values", r->values}, {"cpu_seconds", r->cpu_seconds}, {"nodes", r->nodes},
                {"depth", r->depth}};
  }

  std::string remote_password() const {
    std::string password;
    if (!args_.store.remote_password_env.empty()) {
      const char* v = std::getenv(args_.store.remote_password_env.c_str());
      password = v != nullptr ? v : "";
    } else if (!args_.store.remote_password_file.empty()) {
      std::ifstream in(args_.store.remote_password_file);
      std::getline(in, password);
    }
    return password;
  }

  Json prefill_save(Engine& engine, std::span<const Token> ids) {
    auto t0 = Clock::now();
    if (Status st = single().prefill(ids); !st.ok()) return error(st);
    const double prefill_s = since(t0);
    t0 = Clock::now();
    auto saved = engine.save(ids, single().view());
    if (!saved) return error(saved.error());
    return Json{{"ok", true},
                {"prefill_seconds", prefill_s},
                {"save_seconds", since(t0)},
                {"chunks_written", saved->chunks_written},
                {"bytes_written", saved->bytes_written},
                {"dram_records", engine.stats().dram_records}};
  }

  // Lookup to all KV in place and verified (kvtier checks every payload checksum where it lands).
  Json restore(Engine& engine, std::span<const Token> ids, size_t n) {
    const Stats before = engine.stats();
    const double cpu0 = cpu_seconds();
    auto t0 = Clock::now();
    auto hit = engine.lookup(ids.first(n));
    if (!hit) return error(hit.error());
    auto r = engine.restore(ids.first(n), single().view());
    const double seconds = since(t0);
    const double cpu = cpu_seconds() - cpu0;
    if (!r) return error(r.error());
    const Stats after = engine.stats();
    return Json{{"ok", true},
                {"seconds", seconds},
                {"cpu_seconds", cpu},
                {"lookup_tokens", *hit},
                {"tokens_restored", r->tokens_restored},
                {"kv_bytes", geometry_.bytes_for_tokens(r->tokens_restored)},
                {"bytes_read", r->bytes_read},
                {"host_bytes", r->host_bytes},
                {"checksum_misses", r->checksum_misses},
                {"problem", r->problem},
                {"dram_hits", after.dram_hits - before.dram_hits},
                {"remote_hits", after.remote_hits - before.remote_hits},
                {"remote_misses", (after.remote_absent - before.remote_absent) +
                                      (after.remote_errors - before.remote_errors) +
                                      (after.remote_rejected - before.remote_rejected)},
                {"remote", after.remote},
                {"via_gds", after.gds_restores > before.gds_restores},
                {"gds", after.gds},
                {"fallback", after.io_fallback},
                {"slot_ns", slot_times(before, after)}};
  }

  // Where the restore's staging slots spent their time (Stats' read_slot_*), in ns.
  static Json slot_times(const Stats& before, const Stats& after) {
    return Json{{"total", after.read_slot_ns - before.read_slot_ns},
                {"reading", after.read_slot_reading_ns - before.read_slot_reading_ns},
                {"queued", after.read_slot_queued_ns - before.read_slot_queued_ns},
                {"consuming", after.read_slot_consuming_ns - before.read_slot_consuming_ns},
                {"device_wait", after.read_slot_device_wait_ns - before.read_slot_device_wait_ns},
                {"refill_wait", after.read_slot_refill_wait_ns - before.read_slot_refill_wait_ns}};
  }

  // Concurrent restores: session i of the list goes to cache i, on thread i.
  Json handle_many(const std::string& op, const Json& cmd) {
    if (!engine_ && op != "poison_many")
      return error({ErrorCode::kInvalidArgument, fmt::format("'{}' before 'open'", op)});
    std::vector<std::vector<Token>> ids;
    for (const Json& s : cmd.at("sessions"))
      ids.push_back(
          synthetic::tokens(s.value("seed", uint64_t{0}), s.value("tokens", uint64_t{0})));
    while (caches_.size() < ids.size()) {
      auto kv = caches_.empty() ? Result<std::unique_ptr<BenchKv>>(std::move(kv_))
                                : BenchKv::create(geometry_, args_.max_tokens, args_.device,
                                                  args_.gpu, source_);
      if (!kv) return error(kv.error());
      caches_.push_back(std::move(*kv));
    }
    std::vector<Json> results(ids.size());
    const Stats before = engine_ ? engine_->stats() : Stats{};
    std::vector<std::thread> threads;
    for (size_t i = 0; i < ids.size(); ++i) {
      threads.emplace_back([&, i] {
        BenchKv& kv = *caches_[i];
        if (op == "poison_many") {
          results[i] = done(kv.poison());
        } else if (op == "check_many") {
          auto bad = kv.first_mismatch(ids[i]);
          results[i] =
              bad ? Json{{"ok", true}, {"exact", *bad == ids[i].size()}} : error(bad.error());
        } else if (op == "ceiling_many") {
          auto c = engine_->measure_read_ceiling(ids[i]);
          results[i] = c ? Json{{"ok", true}, {"seconds", c->seconds}} : error(c.error());
        } else if (op == "restore_many") {
          auto t0 = Clock::now();
          auto r = engine_->restore(ids[i], kv.view());
          const double seconds = since(t0);
          results[i] = r ? Json{{"ok", true},
                                {"seconds", seconds},
                                {"tokens_restored", r->tokens_restored},
                                {"kv_bytes", geometry_.bytes_for_tokens(r->tokens_restored)},
                                {"bytes_read", r->bytes_read},
                                {"host_bytes", r->host_bytes}}
                         : error(r.error());
        } else {
          results[i] = error({ErrorCode::kInvalidArgument, fmt::format("unknown op '{}'", op)});
        }
      });
    }
    for (auto& t : threads) t.join();
    const Stats after = engine_ ? engine_->stats() : Stats{};
    Json out = {{"ok", true},
                {"results", Json::array()},
                {"gds_restores", after.gds_restores - before.gds_restores}};
    if (op == "restore_many") out["slot_ns"] = slot_times(before, after);
    for (Json& r : results) {
      if (!r.value("ok", false)) return r;
      out["results"].push_back(std::move(r));
    }
    return out;
  }

  BenchKv& single() { return kv_ ? *kv_ : *caches_.front(); }

  RankArgs args_;
  KvGeometry geometry_;
  KvSource source_;  // --kv, a file's KV read once for every cache of this rank
  std::unique_ptr<BenchKv> kv_;
  std::vector<std::unique_ptr<BenchKv>> caches_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Engine> local_;        // open_local's engine
  Options options_;                      // engine_'s, resolved
  std::unique_ptr<shared::RawGet> raw_;  // the raw GET ceiling's connections, kept across rounds
  uint64_t request_bytes_ = 0;           // the engine's read request size, which fio reads in too
};

}  // namespace

void add_rank_flags(CLI::App& cmd, RankArgs& args) {
  args.store.add_to(cmd, {.remote = true});
  cmd.add_option("--max-tokens", args.max_tokens, "Capacity of the rank's paged KV cache")
      ->required()
      ->transform(cli::whole_number(1, cli::kMaxTokens));
  cmd.add_option("--device", args.device, "auto, cuda or host");
  cmd.add_option("--gpu", args.gpu, "CUDA device of this rank")
      ->transform(cli::whole_number(0, INT32_MAX));
  cmd.add_option("--kv", args.kv, "random, bf16-like or file:PATH")->check(kv_flag_validator());
}

std::vector<std::string> rank_command(const std::string& self, const RankArgs& args) {
  const cli::StoreFlags& store = args.store;
  std::vector<std::string> argv = {self,
                                   "bench-rank",
                                   "--store",
                                   store.root,
                                   "--model",
                                   store.model,
                                   "--tp-rank",
                                   std::to_string(store.tp_rank),
                                   "--tp-world",
                                   std::to_string(store.tp_world),
                                   "--chunk-tokens",
                                   std::to_string(store.chunk_tokens),
                                   "--capacity",
                                   store.capacity,
                                   "--segment-size",
                                   store.segment,
                                   "--request-size",
                                   store.request,
                                   "--staging",
                                   store.staging,
                                   "--max-tokens",
                                   std::to_string(args.max_tokens),
                                   "--device",
                                   args.device,
                                   "--gpu",
                                   std::to_string(args.gpu),
                                   "--store-format",
                                   std::to_string(store.store_format),
                                   "--max-tp",
                                   std::to_string(store.max_tp),
                                   "--compress",
                                   store.compress,
                                   "--kv",
                                   args.kv};
  if (!store.tenant.empty()) argv.insert(argv.end(), {"--tenant", store.tenant});
  if (!store.remote.empty()) {
    argv.insert(argv.end(),
                {"--remote", store.remote, "--remote-ttl", std::to_string(store.remote_ttl)});
  }
  if (!store.remote_password_env.empty())
    argv.insert(argv.end(), {"--remote-password-env", store.remote_password_env});
  if (!store.remote_password_file.empty())
    argv.insert(argv.end(), {"--remote-password-file", store.remote_password_file});
  return argv;
}

int run_rank_worker(const RankArgs& args) {
  Worker worker(args);
  Json hello = worker.start();
  std::cout << hello.dump() << std::endl;
  if (!hello["ok"].get<bool>()) return 1;
  for (std::string line; std::getline(std::cin, line);) {
    Json cmd = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (cmd.is_discarded()) {
      std::cout << Json{{"ok", false}, {"error", "malformed command"}}.dump() << std::endl;
      continue;
    }
    if (cmd.value("op", "") == "quit") break;
    std::cout << worker.handle(cmd).dump() << std::endl;
  }
  return 0;
}

}  // namespace kvtier::seed
