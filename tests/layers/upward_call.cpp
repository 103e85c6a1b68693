// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A stand-in for a layer-1 file that calls up into io (layer 2) through a declaration of its own:
// test layers.upward_call_fails_to_link links it alone, as each layer is, and expects the link to
// fail on this call.
namespace kvtier {

bool gds_compiled_in();

bool calls_up_the_layers() { return gds_compiled_in(); }

}  // namespace kvtier
