// A catalog as bytes and back, for the compiled snapshot of a pools directory (parsing YAML on
// every exec would cost an ADD milliseconds at a hundred pools; docs/pools.md, "Speed").
//   magic "SHMPCAT5" | u64 payload size | u64 checksum of the payload but the blobs | payload
// The payload: u32 pool count, u32 table size, u64 blobs size; the pools' table (per pool: name,
// family, default, blob size, blob checksum, sorted by name) and each pool's blob, so that a
// reader finds the table and the blobs without walking them and touches only the records and
// the pools it asks for; then every other field of the catalog in declaration order. Integers
// little-endian, strings and lists as a u32 count then their items. A snapshot that does not
// decode (another version, truncated, corrupt) is ignored and rebuilt: it is a cache, never the
// truth.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/function_ref.h"
#include "pools/catalog.h"

namespace shmipam::pools {

std::string encode_catalog(const Catalog& catalog);
// The catalog's pools stay encoded in `bytes` until asked for; `backing` keeps them alive (the
// mapping or string they are in).
std::optional<Catalog> decode_catalog(std::string_view bytes, std::shared_ptr<const void> backing);
// A record of a decoded snapshot's pools table (Catalog keeps the table as it is in the
// snapshot), with the pool's blob.
struct PoolRecord {
    std::string_view name;
    engine::Family family = engine::Family::kV4;
    bool is_default = false;
    std::string_view blob;
    uint64_t checksum = 0;
};
// Visits the records of a table decode_catalog accepted, in name order, while `visit` says so.
void for_each_pool_record(std::string_view table, std::string_view blobs, uint32_t count,
                          base::FunctionRef<bool(const PoolRecord&)> visit);
// One pool's blob, checked against its checksum first.
std::optional<IpPool> decode_pool(std::string_view blob, uint64_t checksum);

}  // namespace shmipam::pools
