// Fixed addresses across nodes (docs/cluster.md, "Fixed addresses across nodes"): a StatefulSet
// pod's claim lives in the cluster store, so the pod keeps its address on whichever node it
// runs. Pools for fixed addresses are never cut into blocks; each address is claimed alone:
//
//   <prefix>/v1/pools/<pool>/claims/<claim key>   e.g. .../claims/sts:shop/db-0/eth0
//       -> {"address": "10.9.0.5", "node": "node-a", "nonce": "<16 hex digits>",
//           "keepIdle": <policy>, "idleSinceUnixS": <s, only while no sandbox uses it>}
//   <prefix>/v1/pools/<pool>/addresses/<address>  -> {"claim": "<claim key>"}
//
// A first claim creates both keys in one transaction (each only if absent). A pod that starts on
// another node takes the claim over in one transaction on the claim key's revision, so of two
// nodes only one holds it at a time, and a late DEL on the old node (which gives the claim up
// only while it names that node, at the revision read) can never take it back.
//
// "keepIdle" is the claim's reclaim policy, encoded as the pool state's ClaimFields::keep_idle
// (shm/format.h: 0 never, 1 at the pod's deletion, N + 1 after N seconds idle, 200 years + 1
// while its StatefulSet wants it); "idleSinceUnixS" is when its node last saw no sandbox use it
// (written by the node's DEL that kept the claim, or by the first `cluster gc` that found its
// node gone). `cluster gc` frees a claim of a node gone only by that policy.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/kv_store.h"
#include "engine/addr/ip_address.h"

namespace shmipam::cluster {

struct FixedClaim {
    std::string key;  // the claim key (sts:<ns>/<pod>/<ifname>)
    engine::IpAddress address;
    std::string node;
    int64_t mod_revision = 0;
    uint64_t keep_idle = 0;          // the reclaim policy (format::ClaimFields::keep_idle)
    uint64_t idle_since_unix_s = 0;  // 0: in use (or not known to be idle)
};

// The claim key an address record ({"claim": "<claim key>"}) names; "" for a value of another
// shape.
std::string claim_of_address_record(const KeyValue& record);

// A claim key's value read as a fixed claim, or nullopt when it is not one (a field missing or
// of another type, an address that does not parse, a node that is no node name).
std::optional<FixedClaim> parse_fixed_claim(const std::string& key, const KeyValue& kv);

// The interface a claim key names: its last part ("sts:shop/db-0/eth0" -> "eth0"), which with
// the key makes the fingerprint of the node's local fixed claim.
inline std::string ifname_of_claim_key(const std::string& key) {
    return key.substr(key.rfind('/') + 1);
}

class FixedClaims {
  public:
    FixedClaims(KvStore& kv, std::string prefix) : kv_(kv), prefix_(std::move(prefix)) {}

    // The claim `key` of `pool` for `node`: the one it has (taken over from another node if
    // needed: *moved_from names it), or a new one with the address `pick` chooses among those
    // no claim holds (nullopt from it: none left, code 100). A claim of this node whose address
    // `usable` refuses (excluded or reserved since, or written by hand outside the pool) is
    // given up and a new one made, as a node's own pool state does for a sandbox starting
    // again; another node's is taken over as it is (it may be in use there).
    using Pick =
        std::function<std::optional<engine::IpAddress>(const std::set<std::string>& taken)>;
    using Usable = std::function<bool(const engine::IpAddress&)>;
    // The claim carries `keep_idle` (the pod's reclaim policy now) and is marked in use.
    Expected<FixedClaim> take(
        const std::string& pool, const std::string& key, const std::string& node,
        uint64_t keep_idle, const Pick& pick, std::string* moved_from = nullptr,
        const Usable& usable = [](const engine::IpAddress&) { return true; });
    // Gives the claim up if it is still `node`'s and `unheld_here` (asked after the claim was
    // read, before it is deleted at that revision) says the node holds it no more: false when
    // another node holds it (or none), or this node again. The caller holds the node's pool
    // lock, which an ADD holds from its take until its local claim is made.
    Expected<bool> give_up(
        const std::string& pool, const std::string& key, const std::string& node,
        const std::function<bool()>& unheld_here = [] { return true; });
    // Every claim of the pool (tools); `unreadable` (if given) gets the keys of values that are
    // not a claim (skipped).
    Expected<std::vector<FixedClaim>> all(const std::string& pool,
                                          std::vector<std::string>* unreadable = nullptr);
    // Every claim of every pool, by pool (cluster gc).
    Expected<std::vector<std::pair<std::string, FixedClaim>>> everywhere(
        std::vector<std::string>* unreadable = nullptr);
    // The claim `key` as the store holds it now (nullopt: none, or not a claim).
    Expected<std::optional<FixedClaim>> get(const std::string& pool, const std::string& key);
    // Records that no sandbox uses the claim read as `c` since `since_unix_s`, if it is
    // unchanged since it was read: false when it changed (or already says so).
    Expected<bool> mark_idle(const std::string& pool, const FixedClaim& c, uint64_t since_unix_s);
    // Deletes a claim read as `c` if unchanged since (cluster gc, a take replacing an unusable
    // claim), with its address record if that still names it (compared on its revision too).
    Expected<bool> remove(const std::string& pool, const FixedClaim& c);

    // The operator's recovery after the store went back in time (cluster/
    // fixed_claims_restore.cpp): creates the claim `key` of `node` on exactly `address` if
    // neither the claim nor the address is held in the store; never takes anything over. The
    // claim carries the node's reclaim policy and idle time of it (0: in use).
    struct Restored {
        enum class Outcome { kCreated, kPresent, kConflict } outcome = Outcome::kConflict;
        std::string why;  // kConflict: who holds the claim or the address now
    };
    Expected<Restored> restore(const std::string& pool, const std::string& key,
                               const engine::IpAddress& address, const std::string& node,
                               uint64_t keep_idle, uint64_t idle_since_unix_s);

  private:
    std::string claim_key(const std::string& pool, const std::string& key) const;
    std::string address_key(const std::string& pool, const engine::IpAddress& a) const;
    Expected<std::optional<FixedClaim>> read(const std::string& pool, const std::string& key);

    KvStore& kv_;
    std::string prefix_;
};

}  // namespace shmipam::cluster
