// Base64 as a kubeconfig's *-data fields hold it (RFC 4648 with padding, line breaks ignored:
// what Go's encoding/base64 StdEncoding accepts, which kubectl reads them with). Strict, unlike
// cluster/base64.h's decoder for etcd's own answers: a damaged certificate in a kubeconfig is
// refused with its field's name, never decoded into other bytes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace shmipam::kube {

// The bytes, or nullopt when `text` is not base64 (a character outside the alphabet, a length
// that is not a multiple of 4, padding anywhere but at the end).
std::optional<std::string> base64_decode_strict(std::string_view text);

}  // namespace shmipam::kube
