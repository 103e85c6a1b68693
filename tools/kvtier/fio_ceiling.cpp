// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "fio_ceiling.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/try.hpp"

extern char** environ;

namespace kvtier::cli {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs `argv` (searched on PATH) with stdout and stderr into `output`; its exit status, or -1
/// when it could not be started.
int run_program(const std::vector<std::string>& argv, const std::string& output) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/// The last lines of a program's output, for an error message.
std::string tail_of(const std::string& text) {
  const size_t from = text.size() > 400 ? text.size() - 400 : 0;
  std::string t = text.substr(from);
  std::replace(t.begin(), t.end(), '\n', ' ');
  return t;
}

}  // namespace

std::vector<std::vector<FileExtent>> split_by_device(const std::vector<FileExtent>& extents) {
  std::vector<dev_t> devices;
  std::vector<std::vector<FileExtent>> out;
  for (const FileExtent& x : extents) {
    struct stat st {};
    const dev_t dev = ::stat(x.path.c_str(), &st) == 0 ? st.st_dev : 0;
    const size_t at = static_cast<size_t>(std::find(devices.begin(), devices.end(), dev) - devices.begin());
    if (at == devices.size()) {
      devices.push_back(dev);
      out.emplace_back();
    }
    out[at].push_back(x);
  }
  return out;
}

std::string fio_iolog(const std::vector<FileExtent>& extents, uint64_t request_bytes) {
  std::vector<std::string> files;
  for (const FileExtent& x : extents) {
    if (std::find(files.begin(), files.end(), x.path) == files.end()) files.push_back(x.path);
  }
  std::string log = "fio version 2 iolog\n";
  for (const auto& f : files) log += f + " add\n";
  for (const auto& f : files) log += f + " open\n";
  for (const FileExtent& x : extents) {
    for (uint64_t at = 0; at < x.length; at += request_bytes) {
      log += fmt::format("{} read {} {}\n", x.path, x.offset + at, std::min(request_bytes, x.length - at));
    }
  }
  for (const auto& f : files) log += f + " close\n";
  return log;
}

Result<double> parse_fio_runtime(const std::string& text) {
  // fio may print notes before its JSON.
  const size_t start = text.find('{');
  if (start == std::string::npos) return fail(ErrorCode::kInvalidArgument, "fio printed no JSON: " + tail_of(text));
  const auto json = nlohmann::json::parse(text.substr(start), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.contains("jobs") || !json["jobs"].is_array() || json["jobs"].empty()) {
    return fail(ErrorCode::kInvalidArgument, "fio's output is not its JSON report: " + tail_of(text));
  }
  // The jobs start together; the read is done when the last one is. A job's job_runtime runs from
  // its first submission to its last completion, in ms. (Neither read.runtime nor io_bytes will
  // do: fio 3.33 leaves a replayed log's last completions out of both, and a group report sums
  // job_runtime over its jobs.)
  double ms = 0;
  for (const auto& job : json["jobs"]) {
    if (job.value("error", 0) != 0) {
      return fail(ErrorCode::kIo, fmt::format("fio job {} failed with error {}", job.value("jobname", "?"),
                                              job.value("error", 0)));
    }
    ms = std::max(ms, job.value("job_runtime", 0.0));
  }
  if (ms <= 0) return fail(ErrorCode::kInvalidArgument, "fio read for under a millisecond: too short to time");
  return ms / 1e3;
}

Result<FioCeiling> FioCeiling::find(const std::string& binary, const std::string& work_dir) {
  std::error_code ec;
  fs::create_directories(work_dir, ec);
  const std::string out = (fs::path(work_dir) / "fio-version.txt").string();
  const int rc = run_program({binary, "--version"}, out);
  if (rc != 0) {
    return fail(ErrorCode::kNotFound,
                fmt::format("fio ('{}') {}: the drive's ceiling needs it (Debian: apt install fio; or --fio PATH)",
                            binary, rc < 0 ? "not found" : fmt::format("exited {}", rc)));
  }
  std::string version = slurp(out);
  version.erase(version.find_last_not_of(" \n") + 1);
  return FioCeiling(binary, work_dir, version);
}

Result<FioRead> FioCeiling::run(const std::vector<std::vector<FileExtent>>& streams, uint64_t request_bytes,
                                unsigned depth, const std::string& engine) {
  const fs::path dir(work_dir_);
  const std::string name = fmt::format("fio-{}", runs_++);
  std::string job = fmt::format(
      "[global]\nioengine={}\ndirect=1\nrw=read\nbs={}\niodepth={}\nreplay_no_stall=1\n", engine,
      request_bytes, depth);
  FioRead result;
  result.depth = depth;
  for (size_t s = 0; s < streams.size(); ++s) {
    if (streams[s].empty()) continue;
    const std::string log = (dir / fmt::format("{}-stream{}.iolog", name, s)).string();
    std::ofstream(log) << fio_iolog(streams[s], request_bytes);
    job += fmt::format("[stream{}]\nread_iolog={}\n", s, log);
    for (const FileExtent& x : streams[s]) result.bytes += x.length;
  }
  if (result.bytes == 0) return fail(ErrorCode::kInvalidArgument, "fio: nothing to read");
  const std::string job_path = (dir / (name + ".fio")).string();
  const std::string out = (dir / (name + ".json")).string();
  std::ofstream(job_path) << job;
  const int rc = run_program({binary_, "--output-format=json", job_path}, out);
  const std::string text = slurp(out);
  if (rc != 0) return fail(ErrorCode::kIo, fmt::format("fio exited {}: {}", rc, tail_of(text)));
  KVTIER_ASSIGN_OR_RETURN(result.seconds, parse_fio_runtime(text));
  return result;
}

Result<FioRead> FioCeiling::read(const std::vector<std::vector<FileExtent>>& streams, uint64_t request_bytes,
                                 unsigned depth) {
  if (!engine_.empty()) return run(streams, request_bytes, depth, engine_);
  // The first engine this machine's fio and kernel run; io_uring is what kvtier itself uses.
  Status last;
  for (const char* engine : {"io_uring", "libaio", "psync"}) {
    auto r = run(streams, request_bytes, depth, engine);
    if (r) {
      engine_ = engine;
      return r;
    }
    last = r.error();
  }
  return fail(last);
}

Result<std::vector<FioRead>> FioCeiling::calibrate(const std::vector<std::vector<FileExtent>>& streams,
                                                   uint64_t request_bytes, const std::vector<unsigned>& depths) {
  std::vector<FioRead> runs;
  for (unsigned d : depths) {
    KVTIER_ASSIGN_OR_RETURN(FioRead r, read(streams, request_bytes, d));
    runs.push_back(r);
  }
  const auto best = std::max_element(runs.begin(), runs.end(),
                                     [](const FioRead& a, const FioRead& b) { return a.gbps() < b.gbps(); });
  if (best != runs.end()) depth_ = best->depth;
  return runs;
}

std::string FioCeiling::describe() const {
  return fmt::format("{} replaying the restore's reads (same file ranges, same request size, O_DIRECT, ioengine={}, "
                     "iodepth={} per job, one job per rank and drive, all at once)",
                     version_, engine_.empty() ? "not run" : engine_, depth_);
}

}  // namespace kvtier::cli
