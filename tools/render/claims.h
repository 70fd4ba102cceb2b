// The answer of `shmipamctl claims` and `release --claim`: every fixed-address claim with who
// uses it and when its policy frees it, as a table and as JSON (docs/fixed-ips.md, "The tool").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/ops/allocator.h"

namespace shmipam::tools {

struct ClaimRow {
    std::string network;  // the network, or pool/<name> for a pool mode state
    engine::ClaimView claim;
};

// The parts of a claim key "sts:<namespace>/<name>/<ifname>" (pools/sticky.h).
struct ClaimName {
    std::string kind;  // "sts" or "vm"
    std::string name;  // "<namespace>/<name>"
    std::string ifname;
};
ClaimName parse_claim_key(const std::string& key);

// The claim's policy as people write it ("never", "at DEL", "2h idle", "while its VM exists"):
// `kind` is its key's ("sts" or "vm"), whose owner an owner policy names.
std::string policy_text(uint64_t keep_idle, const std::string& kind);

nlohmann::json claims_json(const std::vector<ClaimRow>& rows, uint64_t now_unix_s);
std::string claims_text(const std::vector<ClaimRow>& rows, uint64_t now_unix_s);

// release --claim: what was (or would be) released, and the claims left alone being in use.
nlohmann::json released_claims_json(const std::vector<ClaimRow>& released,
                                    const std::vector<ClaimRow>& in_use, bool applied);
std::string released_claims_text(const std::vector<ClaimRow>& released,
                                 const std::vector<ClaimRow>& in_use, bool applied);

}  // namespace shmipam::tools
