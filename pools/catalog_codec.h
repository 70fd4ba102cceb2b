// A catalog as bytes and back, for the compiled snapshot of a pools directory (parsing YAML on
// every exec would cost an ADD milliseconds at a hundred pools; docs/pools.md, "Speed").
//   magic "SHMPCAT1" | u64 payload size | u64 FNV-1a of the payload | payload
// The payload: every field of the catalog in declaration order; integers little-endian,
// strings and lists as a u32 count then their items. A snapshot that does not decode (another
// version, truncated, corrupt) is ignored and rebuilt: it is a cache, never the truth.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "pools/catalog.h"

namespace shmipam::pools {

std::string encode_catalog(const Catalog& catalog);
std::optional<Catalog> decode_catalog(std::string_view bytes);

}  // namespace shmipam::pools
