// The protocol between the plugin and the cluster helper (shmipam-cluster), used by both sides
// (docs/cluster.md, "The helper's protocol"). The plugin links no etcd client; on the rare path
// that needs the store it execs the helper with one request on its stdin and reads one answer
// on its stdout. Each request is one struct with an explicit op and the protocol's version:
//
//   {"version": 2, "op": "claim-block", "etcd": {...}, "pool": "p", "node": "n",
//    "stateDir": "/var/lib/cni/networks/_cluster", "cidr": "10.1.0.0/16", "blockPrefix": 26,
//    "maxBlocks": 32, "usable": ["10.1.0.1-10.1.255.254"], "seen": ["10.1.0.0/26"],
//    "ahead": false, "lockHandedOver": true}
//
// The envelope (the version and op, the error answer, the field readers, the helper's main) is
// base/helper_envelope.h's, shared with the Kubernetes helper's protocol: a helper refuses a
// request of another version or an op it does not know (code 1) rather than guess, so an upgrade
// that replaced the plugin but not the helper fails clearly, not by taking a release for a
// claim. An answer is the op's answer struct, or an error {"code", "msg", "details"} (exit
// status 1), which the plugin passes on as its own.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/helper_envelope.h"
#include "base/status.h"
#include "engine/addr/ip_address.h"

namespace shmipam::cluster::protocol {

// Bumped whenever a field's meaning changes or an op is added or removed.
inline constexpr int kVersion = 2;
// This protocol's envelope (base/helper_envelope.h).
inline constexpr base::envelope::Protocol kProtocol{
    "the cluster helper", kVersion,
    "install the plugin and shmipam-cluster of one release side by side (shmipamctl install "
    "puts both)"};
// A request with lock_handed_over: the pool lock, held by the caller, is the helper's fd 3.
inline constexpr int kHandedLockFd = 3;
// ipam.etcd.budgetMs when the config leaves it out (cluster/etcd_config.cpp reads the same).
inline constexpr uint64_t kDefaultBudgetMs = 5000;

// What every request names: the store, the pool, this node, the node's cluster state directory.
struct Scope {
    nlohmann::json etcd;  // ipam.etcd as written in the network config
    std::string pool;
    std::string node;
    std::string state_dir;  // <dataDir>/_cluster
};

// Addresses first..last, both included.
struct AddressRange {
    engine::IpAddress first, last;
};

// How a pool is cut into blocks, and which of them are worth claiming (those with a usable
// address; none listed: all).
struct BlockGeometry {
    engine::Cidr pool_cidr;
    int block_prefix = 0;
    std::vector<AddressRange> usable;
    std::vector<engine::Cidr> seen;  // the node's blocks of the pool, as the caller's cache had
};

// A block for the node: the one holding `address` when given, else the next free one. An ADD
// that found its blocks full; or, with `ahead`, one started detached to claim before need.
struct ClaimBlock {
    Scope scope;
    BlockGeometry geometry;
    uint64_t max_blocks = 32;
    std::optional<engine::IpAddress> address;
    bool ahead = false;
    bool lock_handed_over = false;
};
// Only the node's block cache brought in line with the store (its first ADD since it booted).
struct Refresh {
    Scope scope;
    BlockGeometry geometry;
    bool lock_handed_over = false;
};
// The fixed claim `claim_key`'s address in a pool of fixed addresses: the claim's (taken over
// from another node if needed), or a new one among `usable`.
struct TakeFixed {
    Scope scope;
    std::vector<AddressRange> usable;
    std::string claim_key;
    bool lock_handed_over = false;
    // A requested address: a new claim takes it when no claim holds it (code 101 when one does).
    std::optional<engine::IpAddress> address;
    // This node's pool state (an arena directory) and the attachment's interface: a claim whose
    // address is no longer allocatable is kept while a sandbox here still uses it.
    std::string pool_state, ifname;
    // The pool's CIDR (registered in the cluster as a pool of fixed addresses) and the claim's
    // reclaim policy (format::ClaimFields::keep_idle), which the store's claim carries.
    engine::Cidr pool_cidr;
    uint64_t keep_idle = 0;
};
// Gives the fixed claim up if it is still this node's and the pool state `pool_state` (an
// arena directory; empty: not looked at) holds the local fixed claim (claim_key, ifname) no more
// once the etcd claim has been read; while it holds it idle (its policy keeps it), the store's
// claim is marked idle since now.
struct GiveUpFixed {
    Scope scope;
    std::string claim_key;
    std::string pool_state;
    std::string ifname;
};
// Gives up every fixed claim of the pool that names this node and that the pool state
// `pool_state` holds no more (a CNI GC freed them by their policy), each as GiveUpFixed does.
struct GiveUpUnheld {
    Scope scope;
    std::string pool_state;
};
// Reads the fixed claim `claim_key` (no write): which node holds it now. A sandbox's repeated
// ADD and CHECK ask it, so that a sandbox whose pod's claim moved to another node learns so.
struct ReadFixed {
    Scope scope;
    std::string claim_key;
};
// Gives `block` back to the cluster if it is still empty in `pool_state` and old enough.
struct ReleaseBlock {
    Scope scope;
    engine::Cidr block;
    std::string pool_state;
    uint64_t min_age_s = 300;
    // Even the node's last block of the pool (the node pass, while another node waits).
    bool even_last = false;
};

using Request = std::variant<ClaimBlock, Refresh, TakeFixed, GiveUpFixed, GiveUpUnheld, ReadFixed,
                             ReleaseBlock>;

// What every request names (each op carries its scope).
inline const Scope& scope_of(const Request& r) {
    return std::visit([](const auto& op) -> const Scope& { return op.scope; }, r);
}

std::string encode(const Request& r);
// Code 6 for text that is not a JSON object, 1 for another version or an unknown op, 7 for a
// field missing or of the wrong type (naming it).
Expected<Request> decode(std::string_view text);

// ClaimBlock and Refresh: the block claimed (none: nothing left, or the node at its cap), and
// the node's blocks of the pool as the store gives them now.
struct BlockAnswer {
    std::optional<engine::Cidr> claimed;
    bool at_cap = false;
    std::vector<engine::Cidr> blocks;
    // None claimed and not at the cap: the nodes whose idle blocks the node now waits for (their
    // node pass gives one back), or, when none is idle, the nodes holding the pool's blocks.
    std::vector<std::string> waiting_for, holders;
};
struct FixedAnswer {
    engine::IpAddress address;
    std::string moved_from;  // the node the claim was taken over from, if any
};
// ReadFixed: the node holding the claim ("" when there is none) and its address.
struct FixedOwnerAnswer {
    std::string node;
    std::optional<engine::IpAddress> address;
};
struct GiveUpAnswer {
    bool released = false;
};
struct ReleaseAnswer {
    std::optional<engine::Cidr> released;
    std::string why;
};

nlohmann::json to_json(const BlockAnswer& a);
nlohmann::json to_json(const FixedAnswer& a);
nlohmann::json to_json(const GiveUpAnswer& a);
nlohmann::json to_json(const FixedOwnerAnswer& a);
nlohmann::json to_json(const ReleaseAnswer& a);

// The helper's stdout as the op's answer, or the error it answered (its code), or code 999
// naming what did not parse.
Expected<BlockAnswer> block_answer(std::string_view text);
Expected<FixedAnswer> fixed_answer(std::string_view text);
Expected<GiveUpAnswer> give_up_answer(std::string_view text);
Expected<FixedOwnerAnswer> fixed_owner_answer(std::string_view text);

}  // namespace shmipam::cluster::protocol
