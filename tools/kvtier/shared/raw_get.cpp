// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "raw_get.hpp"

#include <hiredis/hiredis.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

namespace kvtier::shared {
namespace {

struct ContextFree {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};
struct ReplyFree {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextFree>;
using ReplyPtr = std::unique_ptr<redisReply, ReplyFree>;

struct HostPort {
  std::string host;
  int port = 0;
  std::string name() const { return fmt::format("{}:{}", host, port); }
};

Result<std::vector<HostPort>> parse_seeds(std::string seeds) {
  if (seeds.starts_with("redis://")) seeds = seeds.substr(8);
  std::vector<HostPort> out;
  size_t at = 0;
  while (at <= seeds.size()) {
    const size_t comma = std::min(seeds.find(',', at), seeds.size());
    const std::string item = seeds.substr(at, comma - at);
    const size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return fail(ErrorCode::kInvalidArgument, fmt::format("raw GET: bad seed '{}'", item));
    }
    out.push_back({item.substr(0, colon), std::atoi(item.c_str() + colon + 1)});
    at = comma + 1;
  }
  return out;
}

ReplyPtr command(redisContext* c, std::initializer_list<std::string_view> args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return ReplyPtr(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
}

Result<ContextPtr> connect(const HostPort& at, const std::string& password) {
  ContextPtr c(redisConnectWithTimeout(at.host.c_str(), at.port, timeval{2, 0}));
  if (!c || c->err != 0) {
    return fail(ErrorCode::kIo, fmt::format("raw GET: connecting to {}: {}", at.name(),
                                            c ? c->errstr : "out of memory"));
  }
  // Generous: the ceiling waits as long as it takes rather than failing a slow round.
  (void)redisSetTimeout(c.get(), timeval{30, 0});
  if (!password.empty()) {
    ReplyPtr r = command(c.get(), {"AUTH", password});
    if (!r || r->type == REDIS_REPLY_ERROR)
      return fail(ErrorCode::kPermission, fmt::format("raw GET: AUTH refused by {}", at.name()));
  }
  return c;
}

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

/// One connection's share of a run: its keys, GETs kept `depth` deep.
struct Lane {
  redisContext* context = nullptr;
  std::vector<const RemoteRecordKey*> keys;
  uint64_t bytes = 0;
  Status status;

  void run(uint32_t depth) {
    size_t sent = 0;
    for (size_t got = 0; got < keys.size(); ++got) {
      for (; sent < keys.size() && sent - got < depth; ++sent) {
        const char* argv[] = {"GET", keys[sent]->key.data()};
        const size_t lens[] = {3, keys[sent]->key.size()};
        redisAppendCommandArgv(context, 2, argv, lens);
      }
      void* raw = nullptr;
      if (redisGetReply(context, &raw) != REDIS_OK) {
        status = Status(ErrorCode::kIo, fmt::format("raw GET: {}", context->errstr));
        return;
      }
      ReplyPtr reply(static_cast<redisReply*>(raw));
      const RemoteRecordKey& want = *keys[got];
      if (reply->type != REDIS_REPLY_STRING || reply->len != want.value_bytes) {
        status = Status(ErrorCode::kCorrupt,
                        fmt::format("raw GET: {}: reply type {} of {} bytes, expected a value of "
                                    "{} bytes",
                                    want.key, reply->type, reply->len, want.value_bytes));
        return;
      }
      bytes += reply->len;
    }
  }
};

}  // namespace

struct RawGet::Impl {
  RawGetConfig config;
  ContextPtr control;  // asks the cluster for slots
  bool standalone = false;
  struct Node {
    HostPort at;
    std::vector<ContextPtr> connections;
  };
  std::vector<Node> nodes;
  std::vector<int> owner = std::vector<int>(16384, -1);  // slot -> index in nodes
  std::unordered_map<std::string, int> slot_of;

  Status read_slots(const HostPort& seed) {
    ReplyPtr slots = command(control.get(), {"CLUSTER", "SLOTS"});
    if (!slots) return {ErrorCode::kIo, fmt::format("raw GET: CLUSTER SLOTS: {}", control->errstr)};
    if (slots->type == REDIS_REPLY_ERROR) {  // a server without cluster mode
      standalone = true;
      nodes.push_back({seed, {}});
      return {};
    }
    for (size_t i = 0; i < slots->elements; ++i) {
      const redisReply* range = slots->element[i];
      if (range->elements < 3) continue;
      const redisReply* master = range->element[2];
      HostPort at{std::string(master->element[0]->str, master->element[0]->len),
                  static_cast<int>(master->element[1]->integer)};
      if (at.host.empty()) at.host = seed.host;  // "" means the node asked
      auto known = std::find_if(nodes.begin(), nodes.end(),
                                [&](const Node& n) { return n.at.name() == at.name(); });
      if (known == nodes.end()) known = nodes.insert(nodes.end(), Node{at, {}});
      for (long long s = range->element[0]->integer; s <= range->element[1]->integer; ++s)
        owner[static_cast<size_t>(s)] = static_cast<int>(known - nodes.begin());
    }
    return {};
  }

  Status learn_slots(std::span<const RemoteRecordKey> keys) {
    std::vector<const std::string*> unknown;
    for (const auto& k : keys) {
      if (!slot_of.contains(k.key)) unknown.push_back(&k.key);
    }
    if (standalone) {
      for (const std::string* k : unknown) slot_of[*k] = 0;
      return {};
    }
    for (const std::string* k : unknown) {
      const char* argv[] = {"CLUSTER", "KEYSLOT", k->data()};
      const size_t lens[] = {7, 7, k->size()};
      redisAppendCommandArgv(control.get(), 3, argv, lens);
    }
    for (const std::string* k : unknown) {
      void* raw = nullptr;
      if (redisGetReply(control.get(), &raw) != REDIS_OK)
        return {ErrorCode::kIo, fmt::format("raw GET: CLUSTER KEYSLOT: {}", control->errstr)};
      ReplyPtr reply(static_cast<redisReply*>(raw));
      if (reply->type != REDIS_REPLY_INTEGER || reply->integer < 0 || reply->integer >= 16384)
        return {ErrorCode::kIo, "raw GET: CLUSTER KEYSLOT answered no slot"};
      slot_of[*k] = static_cast<int>(reply->integer);
    }
    return {};
  }

  int node_of(const std::string& key) const {
    return standalone ? 0 : owner[static_cast<size_t>(slot_of.at(key))];
  }
};

RawGet::RawGet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RawGet::~RawGet() = default;

Result<std::unique_ptr<RawGet>> RawGet::create(const RawGetConfig& config) {
  auto seeds = parse_seeds(config.seeds);
  if (!seeds) return fail(seeds.error());
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  Status last{ErrorCode::kIo, "raw GET: no seed"};
  for (const HostPort& seed : *seeds) {
    auto c = connect(seed, config.password);
    if (!c) {
      last = c.error();
      continue;
    }
    impl->control = std::move(*c);
    if (Status st = impl->read_slots(seed); !st.ok()) return fail(st);
    break;
  }
  if (!impl->control) return fail(last);
  if (impl->nodes.empty()) return fail(ErrorCode::kIo, "raw GET: CLUSTER SLOTS listed no master");
  for (auto& node : impl->nodes) {
    for (uint32_t i = 0; i < std::max<uint32_t>(1, config.connections_per_node); ++i) {
      auto c = connect(node.at, config.password);
      if (!c) return fail(c.error());
      node.connections.push_back(std::move(*c));
    }
  }
  return std::unique_ptr<RawGet>(new RawGet(std::move(impl)));
}

Result<RawGetResult> RawGet::run(std::span<const RemoteRecordKey> keys, uint64_t in_flight) {
  Impl& m = *impl_;
  if (Status st = m.learn_slots(keys); !st.ok()) return fail(st);
  const uint32_t per_node = static_cast<uint32_t>(m.nodes.front().connections.size());
  std::vector<Lane> lanes(m.nodes.size() * per_node);
  std::vector<uint32_t> next(m.nodes.size(), 0);  // round-robin over a node's connections
  for (const RemoteRecordKey& k : keys) {
    const int node = m.node_of(k.key);
    if (node < 0) return fail(ErrorCode::kIo, fmt::format("raw GET: no master serves {}", k.key));
    const size_t lane = static_cast<size_t>(node) * per_node + next[node]++ % per_node;
    lanes[lane].context = m.nodes[node].connections[lane % per_node].get();
    lanes[lane].keys.push_back(&k);
  }
  RawGetResult out;
  out.nodes = static_cast<uint32_t>(m.nodes.size());
  out.depth = static_cast<uint32_t>(std::max<uint64_t>(1, in_flight / lanes.size()));
  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  {
    std::vector<std::jthread> threads;
    for (Lane& lane : lanes) {
      if (!lane.keys.empty()) threads.emplace_back([&lane, &out] { lane.run(out.depth); });
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.cpu_seconds = cpu_seconds() - cpu0;
  for (const Lane& lane : lanes) {
    if (!lane.status.ok()) return fail(lane.status);
    out.bytes += lane.bytes;
    out.values += lane.keys.size();
  }
  return out;
}

}  // namespace kvtier::shared
