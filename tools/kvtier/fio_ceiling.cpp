// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "fio_ceiling.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/try.hpp"

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
  return WIFEXITED(status) ? WEXITSTATUS(status)
                           : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/// fio's own messages in its output ("fio: ..." lines), else its first 300 characters: for an
/// error.
std::string fio_lines(const std::string& text) {
  std::string lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("fio:") || line.find("error") != std::string::npos)
      lines += (lines.empty() ? "" : " ") + line;
  }
  return lines.empty() ? text.substr(0, 300) : lines.substr(0, 600);
}

}  // namespace

std::vector<std::vector<FileExtent>> split_by_device(const std::vector<FileExtent>& extents) {
  std::vector<dev_t> devices;
  std::vector<std::vector<FileExtent>> out;
  for (const FileExtent& x : extents) {
    struct stat st {};
    const dev_t dev = ::stat(x.path.c_str(), &st) == 0 ? st.st_dev : 0;
    const size_t at =
        static_cast<size_t>(std::find(devices.begin(), devices.end(), dev) - devices.begin());
    if (at == devices.size()) {
      devices.push_back(dev);
      out.emplace_back();
    }
    out[at].push_back(x);
  }
  return out;
}

Result<std::string> fio_job_file(const std::vector<std::vector<FileExtent>>& streams,
                                 uint64_t request_bytes, unsigned depth, const std::string& engine,
                                 std::vector<FioJob>& jobs) {
  std::string file =
      fmt::format("[global]\nioengine={}\ndirect=1\nrw=read\nallow_file_create=0\n", engine);
  jobs.clear();
  for (size_t s = 0; s < streams.size(); ++s) {
    std::string previous;
    for (size_t e = 0; e < streams[s].size(); ++e) {
      const FileExtent& x = streams[s][e];
      if (x.path.find('\n') != std::string::npos) {
        return fail(ErrorCode::kInvalidArgument,
                    "fio: a store path with a line break cannot be named in a job file");
      }
      std::string path;
      for (char c : x.path)
        path += c == ':' ? std::string("\\:") : std::string(1, c);  // ':' separates names
      const uint64_t whole = x.length / request_bytes * request_bytes;
      auto add = [&](const std::string& name, uint64_t offset, uint64_t bytes, uint64_t bs,
                     unsigned jobs_depth) {
        file += fmt::format("[{}]\nfilename={}\noffset={}\nsize={}\nbs={}\niodepth={}\n", name,
                            path, offset, bytes, bs, jobs_depth);
        if (!previous.empty()) file += "wait_for=" + previous + "\n";
        jobs.push_back(FioJob{name, s, bytes});
        previous = name;
      };
      if (whole > 0) add(fmt::format("s{}e{}", s, e), x.offset, whole, request_bytes, depth);
      if (x.length > whole)
        add(fmt::format("s{}e{}t", s, e), x.offset + whole, x.length - whole, x.length - whole, 1);
    }
  }
  if (jobs.empty()) return fail(ErrorCode::kInvalidArgument, "fio: nothing to read");
  return file;
}

Result<FioRead> parse_fio_report(const std::string& text, const std::vector<FioJob>& jobs) {
  // fio may print notes before its JSON.
  const size_t start = text.find('{');
  if (start == std::string::npos)
    return fail(ErrorCode::kInvalidArgument, "fio printed no JSON: " + fio_lines(text));
  const auto json = nlohmann::json::parse(text.substr(start), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.contains("jobs") || !json["jobs"].is_array()) {
    return fail(ErrorCode::kInvalidArgument,
                "fio's output is not its JSON report: " + fio_lines(text));
  }
  std::vector<double> stream_ms;
  double cpu_ms = 0;
  size_t seen = 0;
  for (const auto& job : json["jobs"]) {
    const std::string name = job.value("jobname", "");
    const auto want =
        std::find_if(jobs.begin(), jobs.end(), [&](const FioJob& j) { return j.name == name; });
    if (want == jobs.end()) continue;
    ++seen;
    if (job.value("error", 0) != 0) {
      return fail(ErrorCode::kIo,
                  fmt::format("fio job {} failed with error {}", name, job.value("error", 0)));
    }
    const uint64_t read = job.contains("read") ? job["read"].value("io_bytes", uint64_t{0}) : 0;
    if (read != want->bytes) {
      return fail(ErrorCode::kIo,
                  fmt::format("fio job {} read {} bytes of {}", name, read, want->bytes));
    }
    if (stream_ms.size() <= want->stream) stream_ms.resize(want->stream + 1, 0);
    const double runtime_ms = job.value("job_runtime", 0.0);
    stream_ms[want->stream] += runtime_ms;
    cpu_ms += (job.value("usr_cpu", 0.0) + job.value("sys_cpu", 0.0)) / 100 * runtime_ms;
  }
  if (seen != jobs.size()) {
    return fail(ErrorCode::kIo, fmt::format("fio reported {} of its {} jobs", seen, jobs.size()));
  }
  const double ms = stream_ms.empty() ? 0 : *std::max_element(stream_ms.begin(), stream_ms.end());
  if (ms <= 0)
    return fail(ErrorCode::kInvalidArgument, "fio read for under a millisecond: too short to time");
  FioRead read;
  read.seconds = ms / 1e3;
  read.cpu_seconds = cpu_ms / 1e3;
  return read;
}

Result<FioCeiling> FioCeiling::find(const std::string& binary, const std::string& work_dir) {
  std::error_code ec;
  fs::create_directories(work_dir, ec);
  const std::string out = (fs::path(work_dir) / "fio-version.txt").string();
  const int rc = run_program({binary, "--version"}, out);
  if (rc != 0) {
    return fail(
        ErrorCode::kNotFound,
        fmt::format(
            "fio ('{}') {}: the drive's ceiling needs it (Debian: apt install fio; or --fio PATH)",
            binary, rc < 0 ? "not found" : fmt::format("exited {}", rc)));
  }
  std::string version = slurp(out);
  version.erase(version.find_last_not_of(" \n") + 1);
  return FioCeiling(binary, work_dir, version);
}

Result<FioRead> FioCeiling::run(const std::vector<std::vector<FileExtent>>& streams,
                                uint64_t request_bytes, unsigned depth, const std::string& engine) {
  const fs::path dir(work_dir_);
  const std::string name = fmt::format("fio-{}", runs_++);
  std::vector<FioJob> jobs;
  KVTIER_ASSIGN_OR_RETURN(std::string job,
                          fio_job_file(streams, request_bytes, depth, engine, jobs));
  FioRead result;
  result.depth = depth;
  for (const FioJob& j : jobs) result.bytes += j.bytes;
  const std::string job_path = (dir / (name + ".fio")).string();
  const std::string out = (dir / (name + ".json")).string();
  std::ofstream(job_path) << job;
  // --readonly: fio otherwise extends a file shorter than a job's range by writing to it.
  const int rc = run_program({binary_, "--readonly", "--output-format=json", job_path}, out);
  const std::string text = slurp(out);
  if (rc != 0) return fail(ErrorCode::kIo, fmt::format("fio exited {}: {}", rc, fio_lines(text)));
  KVTIER_ASSIGN_OR_RETURN(const FioRead parsed, parse_fio_report(text, jobs));
  result.seconds = parsed.seconds;
  result.cpu_seconds = parsed.cpu_seconds;
  return result;
}

Result<FioRead> FioCeiling::read(const std::vector<std::vector<FileExtent>>& streams,
                                 uint64_t request_bytes, unsigned depth) {
  if (!engine_.empty()) return run(streams, request_bytes, depth, engine_);
  // The first engine this machine's fio and kernel run; io_uring is what kvtier itself uses.
  // Another engine only when this one is what failed (fio says "engine"), not for a bad path.
  Status last;
  for (const char* engine : {"io_uring", "libaio"}) {
    auto r = run(streams, request_bytes, depth, engine);
    if (r) {
      engine_ = engine;
      return r;
    }
    last = r.error();
    if (last.message().find("engine") == std::string::npos) break;
  }
  return fail(last);
}

Result<std::vector<FioRead>> FioCeiling::calibrate(
    const std::vector<std::vector<FileExtent>>& streams, uint64_t request_bytes,
    const std::vector<unsigned>& depths) {
  // Shallow and deep alternately: the order must not always hand the deeper runs a warmer cache.
  std::vector<unsigned> order;
  for (size_t lo = 0, hi = depths.size(); lo < hi;) {
    order.push_back(depths[lo++]);
    if (lo < hi) order.push_back(depths[--hi]);
  }
  std::vector<FioRead> runs;
  Status last;
  for (unsigned d : order) {
    auto r = read(streams, request_bytes, d);
    if (r)
      runs.push_back(*r);
    else
      last = r.error();
  }
  if (runs.empty()) return fail(last);
  std::sort(runs.begin(), runs.end(),
            [](const FioRead& a, const FioRead& b) { return a.depth < b.depth; });
  const auto best =
      std::max_element(runs.begin(), runs.end(),
                       [](const FioRead& a, const FioRead& b) { return a.gbps() < b.gbps(); });
  if (best != runs.end()) depth_ = best->depth;
  return runs;
}

std::string FioCeiling::describe() const {
  return fmt::format(
      "{} reading the restore's file ranges (same ranges in the same order, same request size, "
      "O_DIRECT, ioengine={}, iodepth={} per stream, one stream per rank and drive, all at once)",
      version_, engine_.empty() ? "not run" : engine_, depth_);
}

}  // namespace kvtier::cli
