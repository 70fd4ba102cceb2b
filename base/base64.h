// Base64 (RFC 4648, with padding): etcd's JSON gateway writes keys and values in it
// (cluster/), a kubeconfig its *-data fields (kube/).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace shmipam::base {

std::string base64_encode(std::string_view bytes);
// Undoes base64_encode; characters outside the alphabet are skipped (etcd's own answers).
std::string base64_decode(std::string_view text);
// Strict, as Go's encoding/base64 StdEncoding reads a kubeconfig's *-data fields (line breaks
// ignored): nullopt for a character outside the alphabet, a length that is not a multiple of 4,
// or padding anywhere but at the end, so that a damaged certificate is refused, never decoded
// into other bytes.
std::optional<std::string> base64_decode_strict(std::string_view text);

}  // namespace shmipam::base
