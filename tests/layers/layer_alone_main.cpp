// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The program each layer library is linked into whole, alone with the layers it names
// (tests/CMakeLists.txt): linking it is the check, so it does nothing.
int main() { return 0; }
