// FixedClaims::restore (cluster/fixed_claims.h): the operator's recovery putting a node's fixed
// claims back into a store that went back in time (docs/cluster.md, "The store went back in
// time"). Kept apart from fixed_claims.cpp: it only creates what is absent, through the same
// keys, and never takes a claim or an address over (a conflict is the operator's to judge).
#include <nlohmann/json.hpp>

#include "cluster/fixed_claims.h"

namespace shmipam::cluster {

using nlohmann::json;

namespace {

// Rounds of create-then-read before giving up: each lost round means another writer changed the
// claim or the address between this one's create and its read.
constexpr int kRestoreTries = 4;

}  // namespace

Expected<FixedClaims::Restored> FixedClaims::restore(const std::string& pool,
                                                     const std::string& key,
                                                     const engine::IpAddress& address,
                                                     const std::string& node, uint64_t keep_idle,
                                                     uint64_t idle_since_unix_s) {
    using Target = KvStore::Compare::Target;
    // The value take() writes (cluster/fixed_claims.cpp), so parse_fixed_claim reads it.
    json claim{{"address", address.to_string()},
               {"node", node},
               {"nonce", nonce()},
               {"keepIdle", keep_idle}};
    if (idle_since_unix_s != 0) claim["idleSinceUnixS"] = idle_since_unix_s;
    const std::string claim_k = claim_key(pool, key), address_k = address_key(pool, address);
    for (int attempt = 0; attempt < kRestoreTries; ++attempt) {
        // Both keys only if both are absent, in one transaction.
        auto done = kv_.txn({{claim_k, Target::kCreate, 0}, {address_k, Target::kCreate, 0}},
                            {{claim_k, claim.dump()}, {address_k, json{{"claim", key}}.dump()}});
        if (!done) return done.error();
        if (*done) return Restored{Restored::Outcome::kCreated, ""};
        auto held = read(pool, key);
        if (!held) return held.error();
        if (*held) {
            // Also this call's own earlier attempt, whose answer was lost (same node, address).
            if ((*held)->node == node && (*held)->address == address) {
                return Restored{Restored::Outcome::kPresent, ""};
            }
            return Restored{Restored::Outcome::kConflict, "the store gives claim " + key +
                                                              " to node " + (*held)->node + " on " +
                                                              (*held)->address.to_string()};
        }
        auto record = kv_.get(address_k);
        if (!record) return record.error();
        if (!*record) continue;  // both gone again meanwhile: try the create again
        const std::string holder = claim_of_address_record(**record);
        if (holder != key) {
            return Restored{Restored::Outcome::kConflict,
                            address.to_string() + " is held by claim " +
                                (holder.empty() ? std::string("(unreadable record)") : holder)};
        }
        // The address record names this claim, the claim itself is gone: the claim is created
        // on it while the record is unchanged.
        auto made = kv_.txn(
            {{claim_k, Target::kCreate, 0}, {address_k, Target::kMod, (*record)->mod_revision}},
            {{claim_k, claim.dump()}});
        if (!made) return made.error();
        if (*made) return Restored{Restored::Outcome::kCreated, ""};
    }
    return make_error(Code::kTryAgainLater,
                      "the fixed-address claim " + key + " kept changing while being restored");
}

}  // namespace shmipam::cluster
