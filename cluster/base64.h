// Base64 (RFC 4648, with padding), as etcd's JSON gateway writes keys and values.
#pragma once

#include <string>
#include <string_view>

namespace shmipam::cluster {

std::string base64_encode(std::string_view bytes);
// Undoes base64_encode; characters outside the alphabet are skipped.
std::string base64_decode(std::string_view text);

}  // namespace shmipam::cluster
