// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "remote/credentials.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "common/posix.hpp"

namespace kvtier::remote {

Result<std::string> read_password(const std::string& env_name, const std::string& path) {
  if (!env_name.empty()) {
    const char* value = std::getenv(env_name.c_str());
    if (value == nullptr) {
      return fail(ErrorCode::kInvalidArgument,
                  fmt::format("remote password: environment variable {} is not set", env_name));
    }
    return std::string(value);
  }
  if (path.empty()) return std::string();
  auto text = read_file(path);
  if (!text) return fail(text.error().with_context("remote password file"));
  std::string password = std::move(*text);
  if (!password.empty() && password.back() == '\n') password.pop_back();
  if (!password.empty() && password.back() == '\r') password.pop_back();
  return password;
}

}  // namespace kvtier::remote
