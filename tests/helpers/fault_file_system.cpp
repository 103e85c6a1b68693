// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "fault_file_system.hpp"

#include <fcntl.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "common/posix.hpp"

namespace kvtier::testing {

namespace fs = std::filesystem;

struct FaultFileSystem::Node {
  enum class Kind { kWrite, kTruncate, kExtend };
  struct Op {
    Kind kind = Kind::kWrite;
    uint64_t offset = 0;  // kWrite
    std::string bytes;    // kWrite
    uint64_t size = 0;    // kTruncate, kExtend
  };
  std::string path;                    // where the real file is now; empty once removed or replaced
  std::optional<std::string> durable;  // content at its last sync; unset: the real file's content
  std::vector<Op> pending;             // since then, in order
};

struct FaultFileSystem::NameOp {
  enum class Kind { kCreate, kRename, kRemove, kMakeDir };
  Kind kind = Kind::kCreate;
  std::string dir;   // the directory whose sync makes it durable
  std::string path;  // created, removed or renamed to
  std::string from;  // kRename
  std::shared_ptr<Node> node;
  std::shared_ptr<Node> replaced;  // kRename: what `path` held before
};

namespace {

std::string parent_of(const std::string& path) {
  return fs::path(path).lexically_normal().parent_path().string();
}

const char* op_name(FsOp op) {
  switch (op) {
    case FsOp::kOpen:
      return "open";
    case FsOp::kRead:
      return "read";
    case FsOp::kWrite:
      return "write";
    case FsOp::kSync:
      return "sync";
    case FsOp::kTruncate:
      return "truncate";
    case FsOp::kAllocate:
      return "allocate";
    case FsOp::kStat:
      return "stat";
    case FsOp::kLock:
      return "lock";
    case FsOp::kRename:
      return "rename";
    case FsOp::kRemove:
      return "remove";
    case FsOp::kMakeDir:
      return "mkdir";
    case FsOp::kListDir:
      return "list";
    case FsOp::kSyncDir:
      return "syncdir";
  }
  return "?";
}

bool mutating(FsOp op) {
  switch (op) {
    case FsOp::kWrite:
    case FsOp::kSync:
    case FsOp::kTruncate:
    case FsOp::kAllocate:
    case FsOp::kRename:
    case FsOp::kRemove:
    case FsOp::kMakeDir:
    case FsOp::kSyncDir:
      return true;
    case FsOp::kOpen:  // decided by its flags
    case FsOp::kRead:
    case FsOp::kStat:
    case FsOp::kLock:
    case FsOp::kListDir:
      return false;
  }
  return false;
}

void apply(const FaultFileSystem::Node& node, size_t kept, uint64_t torn, std::string& content);

}  // namespace

/// @brief A File of the FaultFileSystem: each call is checked, each change tracked on its node.
class FaultFile final : public File {
 public:
  FaultFile(FaultFileSystem& owner, std::unique_ptr<File> inner,
            std::shared_ptr<FaultFileSystem::Node> node)
      : File(inner->path()), owner_(owner), inner_(std::move(inner)), node_(std::move(node)) {}

  int fd() const override { return inner_->fd(); }
  Result<size_t> read(std::span<std::byte> buf, uint64_t offset) override {
    std::lock_guard lock(owner_.mu_);
    if (Status st = owner_.check_locked(FsOp::kRead, path()); !st.ok()) return fail(st);
    return inner_->read(buf, offset);
  }
  Status write_at(std::span<const std::byte> buf, uint64_t offset) override;
  Status sync() override {
    std::lock_guard lock(owner_.mu_);
    if (Status st = owner_.check_locked(FsOp::kSync, path()); !st.ok()) return st;
    if (Status st = inner_->sync(); !st.ok()) return st;
    node_->durable.reset();
    node_->pending.clear();
    return {};
  }
  Status truncate(uint64_t size) override {
    return change(FsOp::kTruncate, {FaultFileSystem::Node::Kind::kTruncate, 0, {}, size},
                  [&] { return inner_->truncate(size); });
  }
  Status allocate(uint64_t size) override {
    return change(FsOp::kAllocate, {FaultFileSystem::Node::Kind::kExtend, 0, {}, size},
                  [&] { return inner_->allocate(size); });
  }
  Result<FileInfo> stat() override {
    std::lock_guard lock(owner_.mu_);
    if (Status st = owner_.check_locked(FsOp::kStat, path()); !st.ok()) return fail(st);
    return inner_->stat();
  }
  Status try_lock(LockMode mode) override {
    std::lock_guard lock(owner_.mu_);
    if (Status st = owner_.check_locked(FsOp::kLock, path()); !st.ok()) return st;
    return inner_->try_lock(mode);
  }
  void unlock() override { inner_->unlock(); }

 private:
  template <typename F>
  Status change(FsOp op, FaultFileSystem::Node::Op record, F&& real) {
    std::lock_guard lock(owner_.mu_);
    if (Status st = owner_.check_locked(op, path()); !st.ok()) return st;
    owner_.snapshot_locked(*node_);
    if (Status st = real(); !st.ok()) return st;
    node_->pending.push_back(std::move(record));
    return {};
  }
  /// Writes `buf` for real and tracks it as not yet durable.
  Status write_locked(std::span<const std::byte> buf, uint64_t offset) {
    owner_.snapshot_locked(*node_);
    if (Status st = inner_->write_at(buf, offset); !st.ok()) return st;
    node_->pending.push_back({FaultFileSystem::Node::Kind::kWrite, offset,
                              std::string(reinterpret_cast<const char*>(buf.data()), buf.size()),
                              0});
    return {};
  }

  FaultFileSystem& owner_;
  std::unique_ptr<File> inner_;
  std::shared_ptr<FaultFileSystem::Node> node_;
};

Status FaultFile::write_at(std::span<const std::byte> buf, uint64_t offset) {
  std::lock_guard lock(owner_.mu_);
  FsFault hit;
  hit.written = 0;
  const bool was_crashed = owner_.crashed_;
  Status st = owner_.check_locked(FsOp::kWrite, path(), &hit);
  if (st.ok()) return write_locked(buf, offset);
  uint64_t landed = std::min<uint64_t>(hit.written, buf.size());
  if (!was_crashed && owner_.crashed_ && owner_.mode_ == CrashMode::kKeepSome) {
    // The write the power cut came in: part of it may be on the platter, whole sectors of it.
    landed = std::uniform_int_distribution<uint64_t>(0, buf.size() / 512)(owner_.random_) * 512;
    node_->pending.push_back({FaultFileSystem::Node::Kind::kWrite, offset,
                              std::string(reinterpret_cast<const char*>(buf.data()), landed), 0});
    return st;
  }
  if (landed > 0) static_cast<void>(write_locked(buf.first(landed), offset));
  return st;
}

FaultFileSystem::FaultFileSystem(uint64_t seed) : random_(seed) {}
FaultFileSystem::~FaultFileSystem() = default;

void FaultFileSystem::add_fault(FsFault fault) {
  std::lock_guard lock(mu_);
  faults_.emplace_back(std::move(fault), 0);
}

void FaultFileSystem::clear_faults() {
  std::lock_guard lock(mu_);
  faults_.clear();
}

void FaultFileSystem::crash_after(uint64_t n, CrashMode mode, std::string path_part) {
  std::lock_guard lock(mu_);
  crash_in_ = std::max<uint64_t>(n, 1);
  crash_part_ = std::move(path_part);
  mode_ = mode;
}

void FaultFileSystem::crash(CrashMode mode) {
  std::lock_guard lock(mu_);
  crashed_ = true;
  mode_ = mode;
}

bool FaultFileSystem::crashed() const {
  std::lock_guard lock(mu_);
  return crashed_;
}

std::string FaultFileSystem::crash_point() const {
  std::lock_guard lock(mu_);
  return crash_point_;
}

uint64_t FaultFileSystem::mutations() const {
  std::lock_guard lock(mu_);
  return mutations_;
}

Status FaultFileSystem::check_locked(FsOp op, const std::string& path, FsFault* hit) {
  return check_call_locked(op, path, mutating(op), hit);
}

Status FaultFileSystem::check_call_locked(FsOp op, const std::string& path, bool mutates,
                                          FsFault* hit) {
  if (crashed_) {
    return {ErrorCode::kIo, fmt::format("{} {}: simulated power cut", op_name(op), path), EIO};
  }
  if (mutates) {
    ++mutations_;
    const bool counted = crash_part_.empty() || path.find(crash_part_) != std::string::npos;
    if (crash_in_ && counted && --*crash_in_ == 0) {
      crash_in_.reset();
      crashed_ = true;
      crash_point_ = fmt::format("{} {}", op_name(op), fs::path(path).filename().string());
      return {ErrorCode::kIo, fmt::format("{} {}: simulated power cut", op_name(op), path), EIO};
    }
  }
  for (auto& [fault, seen] : faults_) {
    if (fault.op != op) continue;
    if (!fault.path_part.empty() && path.find(fault.path_part) == std::string::npos) continue;
    ++seen;
    if (seen < fault.nth || seen - fault.nth >= fault.times) continue;
    if (hit != nullptr) *hit = fault;
    return posix_error(fault.error, fmt::format("injected: {} {}", op_name(op), path));
  }
  return {};
}

std::shared_ptr<FaultFileSystem::Node> FaultFileSystem::node_locked(const std::string& path) {
  auto& node = nodes_[path];
  if (!node) {
    node = std::make_shared<Node>();
    node->path = path;
  }
  return node;
}

void FaultFileSystem::snapshot_locked(Node& node) {
  if (node.durable || node.path.empty()) return;
  auto text = read_file(*real_, node.path);
  node.durable = text ? std::move(*text) : std::string();
}

Result<std::unique_ptr<File>> FaultFileSystem::open(const std::string& path, int flags,
                                                    mode_t mode) {
  std::lock_guard lock(mu_);
  const bool create = (flags & O_CREAT) != 0, trunc = (flags & O_TRUNC) != 0;
  if (Status st = check_call_locked(FsOp::kOpen, path, create || trunc); !st.ok()) return fail(st);
  const bool existed = real_->stat(path).has_value();
  std::shared_ptr<Node> node = existed ? node_locked(path) : nullptr;
  if (existed && trunc) snapshot_locked(*node);
  auto inner = real_->open(path, flags, mode);
  if (!inner) return fail(inner.error());
  if (!existed) {  // made by this call: empty until a sync says otherwise, gone until a dir sync
    node = std::make_shared<Node>();
    node->path = path;
    node->durable = std::string();
    nodes_[path] = node;
    name_ops_.push_back({NameOp::Kind::kCreate, parent_of(path), path, {}, node, nullptr});
  } else if (trunc) {
    node->pending.push_back({Node::Kind::kTruncate, 0, {}, 0});
  }
  return std::unique_ptr<File>(new FaultFile(*this, std::move(*inner), node));
}

Status FaultFileSystem::rename(const std::string& from, const std::string& to) {
  std::lock_guard lock(mu_);
  if (Status st = check_locked(FsOp::kRename, to); !st.ok()) return st;
  std::shared_ptr<Node> node = node_locked(from);
  std::shared_ptr<Node> replaced;
  if (real_->stat(to)) {
    replaced = node_locked(to);
    snapshot_locked(*replaced);
  }
  if (Status st = real_->rename(from, to); !st.ok()) return st;
  if (replaced) replaced->path.clear();
  node->path = to;
  nodes_.erase(from);
  nodes_[to] = node;
  name_ops_.push_back({NameOp::Kind::kRename, parent_of(to), to, from, node, replaced});
  return {};
}

Status FaultFileSystem::remove(const std::string& path) {
  std::lock_guard lock(mu_);
  // Removing what is not there changes nothing: not counted as a mutating call.
  if (!crashed_ && !real_->stat(path)) return real_->remove(path);
  if (Status st = check_locked(FsOp::kRemove, path); !st.ok()) return st;
  std::shared_ptr<Node> node = node_locked(path);
  snapshot_locked(*node);
  if (Status st = real_->remove(path); !st.ok()) return st;
  node->path.clear();
  nodes_.erase(path);
  name_ops_.push_back({NameOp::Kind::kRemove, parent_of(path), path, {}, node, nullptr});
  return {};
}

Status FaultFileSystem::make_dir(const std::string& path) {
  std::lock_guard lock(mu_);
  if (Status st = check_locked(FsOp::kMakeDir, path); !st.ok()) return st;
  if (Status st = real_->make_dir(path); !st.ok()) return st;
  name_ops_.push_back({NameOp::Kind::kMakeDir, parent_of(path), path, {}, nullptr, nullptr});
  return {};
}

Result<std::vector<std::string>> FaultFileSystem::list_dir(const std::string& dir) {
  std::lock_guard lock(mu_);
  if (Status st = check_locked(FsOp::kListDir, dir); !st.ok()) return fail(st);
  return real_->list_dir(dir);
}

Result<FileInfo> FaultFileSystem::stat(const std::string& path) {
  std::lock_guard lock(mu_);
  if (Status st = check_locked(FsOp::kStat, path); !st.ok()) return fail(st);
  return real_->stat(path);
}

Status FaultFileSystem::sync_dir(const std::string& dir) {
  std::lock_guard lock(mu_);
  if (Status st = check_locked(FsOp::kSyncDir, dir); !st.ok()) return st;
  if (Status st = real_->sync_dir(dir); !st.ok()) return st;
  const std::string normal = fs::path(dir).lexically_normal().string();
  std::erase_if(name_ops_, [&](const NameOp& op) { return op.dir == normal; });
  return {};
}

Status FaultFileSystem::check_writable(const std::string& path) {
  std::lock_guard lock(mu_);
  if (Status st = check_locked(FsOp::kStat, path); !st.ok()) return st;
  return real_->check_writable(path);
}

Result<uint64_t> FaultFileSystem::free_bytes(const std::string& dir) {
  std::lock_guard lock(mu_);
  if (Status st = check_locked(FsOp::kStat, dir); !st.ok()) return fail(st);
  return real_->free_bytes(dir);
}

namespace {

// The node's content after a crash that kept its first `kept` unsynced changes and `torn` bytes of
// the one after.
void apply(const FaultFileSystem::Node& node, size_t kept, uint64_t torn, std::string& content) {
  using Kind = FaultFileSystem::Node::Kind;
  auto write = [&](uint64_t offset, std::string_view bytes) {
    if (content.size() < offset + bytes.size()) content.resize(offset + bytes.size());
    content.replace(offset, bytes.size(), bytes);
  };
  for (size_t i = 0; i < kept; ++i) {
    const auto& op = node.pending[i];
    switch (op.kind) {
      case Kind::kWrite:
        write(op.offset, op.bytes);
        break;
      case Kind::kTruncate:
        content.resize(op.size);
        break;
      case Kind::kExtend:
        if (content.size() < op.size) content.resize(op.size);
        break;
    }
  }
  if (kept < node.pending.size() && torn > 0 && node.pending[kept].kind == Kind::kWrite) {
    const auto& op = node.pending[kept];
    write(op.offset, std::string_view(op.bytes).substr(0, torn));
  }
}

}  // namespace

void FaultFileSystem::recover() {
  std::lock_guard lock(mu_);
  materialize_locked();
  nodes_.clear();
  name_ops_.clear();
  crash_in_.reset();
  crashed_ = false;
  crash_point_.clear();
}

void FaultFileSystem::materialize_locked() {
  const bool some = mode_ == CrashMode::kKeepSome;
  // The names: undurable operations undone, newest first (a prefix of them kept under kKeepSome).
  std::map<std::string, std::shared_ptr<Node>> post = nodes_;
  std::set<std::string> paths;
  for (const auto& [path, node] : nodes_) paths.insert(path);
  const size_t kept_names =
      some ? std::uniform_int_distribution<size_t>(0, name_ops_.size())(random_) : 0;
  std::vector<std::string> lost_dirs;
  for (size_t i = name_ops_.size(); i-- > kept_names;) {
    const NameOp& op = name_ops_[i];
    paths.insert(op.path);
    switch (op.kind) {
      case NameOp::Kind::kCreate:
        post.erase(op.path);
        break;
      case NameOp::Kind::kRename:
        paths.insert(op.from);
        post[op.from] = op.node;
        if (op.replaced) {
          post[op.path] = op.replaced;
        } else {
          post.erase(op.path);
        }
        break;
      case NameOp::Kind::kRemove:
        post[op.path] = op.node;
        break;
      case NameOp::Kind::kMakeDir:
        lost_dirs.push_back(op.path);
        break;
    }
  }
  // The contents, all read before anything is changed.
  std::map<std::string, std::string> contents;
  for (const std::string& path : paths) {
    auto it = post.find(path);
    if (it == post.end()) continue;
    Node& node = *it->second;
    snapshot_locked(node);
    std::string content = node.durable.value_or(std::string());
    size_t kept = 0;
    uint64_t torn = 0;
    if (some && !node.pending.empty()) {
      kept = std::uniform_int_distribution<size_t>(0, node.pending.size())(random_);
      torn = std::uniform_int_distribution<uint64_t>(0, 8)(random_) * 512;
    }
    apply(node, kept, torn, content);
    contents[path] = std::move(content);
  }
  for (const std::string& path : paths) {
    std::error_code ec;
    fs::remove(path, ec);
    auto it = contents.find(path);
    if (it == contents.end() || !fs::is_directory(fs::path(path).parent_path(), ec)) continue;
    auto file = real_->open(path, O_WRONLY | O_CREAT | O_TRUNC);
    if (file && !it->second.empty()) {
      static_cast<void>((*file)->write_at(std::as_bytes(std::span(it->second)), 0));
    }
  }
  for (auto it = lost_dirs.rbegin(); it != lost_dirs.rend(); ++it) {
    std::error_code ec;
    fs::remove_all(*it, ec);
  }
}

}  // namespace kvtier::testing
