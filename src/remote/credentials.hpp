// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The cluster password: read from an environment variable or a file named by the user, held only
// in memory, never logged or printed (errors name the variable or file, never the value).
#pragma once

#include <string>

#include "kvtier/status.hpp"

namespace kvtier::remote {

/// The password from `env_name` (when non-empty) or else from the file `path` (when non-empty;
/// one trailing newline dropped); "" when both are empty. A named variable that is unset or a
/// file that cannot be read is an error, so a typo never silently connects without AUTH.
[[nodiscard]] Result<std::string> read_password(const std::string& env_name,
                                                const std::string& path);

}  // namespace kvtier::remote
