#include "cluster/fixed_claims.h"

#include <nlohmann/json.hpp>

#include "cluster/key_schema.h"
#include "cluster/node_name.h"

namespace shmipam::cluster {

using nlohmann::json;

namespace {

// A claim's value as it is stored.
json value_of(const engine::IpAddress& a, const std::string& node, uint64_t keep_idle,
              uint64_t idle_since_unix_s = 0) {
    json v{{"address", a.to_string()}, {"node", node}, {"nonce", nonce()}, {"keepIdle", keep_idle}};
    if (idle_since_unix_s != 0) v["idleSinceUnixS"] = idle_since_unix_s;
    return v;
}

}  // namespace

std::string claim_of_address_record(const KeyValue& record) {
    const json v = json::parse(record.value, nullptr, false);
    const auto claim = v.is_object() ? v.find("claim") : v.end();
    return v.is_object() && claim != v.end() && claim->is_string() ? claim->get<std::string>() : "";
}

std::optional<FixedClaim> parse_fixed_claim(const std::string& key, const KeyValue& kv) {
    const json v = json::parse(kv.value, nullptr, false);
    if (!v.is_object() || key.empty() || key.find('/') == std::string::npos) return std::nullopt;
    // Every field of its type: a value written by hand or damaged is skipped and reported
    // (cluster ls), never read with a default and never a throw.
    const auto text = [&](const char* k) -> std::optional<std::string> {
        const auto it = v.find(k);
        if (it == v.end() || !it->is_string()) return std::nullopt;
        return it->get<std::string>();
    };
    const auto number = [&](const char* k) -> std::optional<uint64_t> {
        const auto it = v.find(k);
        if (it == v.end() || !it->is_number_unsigned()) return std::nullopt;
        return it->get<uint64_t>();
    };
    const auto address = text("address");
    const auto node = text("node");
    const auto keep_idle = number("keepIdle");
    auto a = address ? engine::IpAddress::parse(*address) : std::nullopt;
    if (!a || !node || !is_node_name(*node) || !text("nonce") || !keep_idle) return std::nullopt;
    if (v.contains("idleSinceUnixS") && !number("idleSinceUnixS")) return std::nullopt;
    return FixedClaim{
        key, *a, *node, kv.mod_revision, *keep_idle, number("idleSinceUnixS").value_or(0)};
}

namespace {

// Whether an address record (`{"claim": "<claim key>"}`) names the claim `key`; a value of
// another shape names none.
bool record_names(const KeyValue& record, const std::string& key) {
    return claim_of_address_record(record) == key;
}

// Tries before a claim gives up on racing writers (each lost race means another writer won).
constexpr int kTries = 16;

}  // namespace

std::string FixedClaims::claim_key(const std::string& pool, const std::string& key) const {
    return keys::claim(prefix_, pool, key);
}

std::string FixedClaims::address_key(const std::string& pool, const engine::IpAddress& a) const {
    return keys::address(prefix_, pool, a);
}

Expected<std::optional<FixedClaim>> FixedClaims::read(const std::string& pool,
                                                      const std::string& key) {
    auto kv = kv_.get(claim_key(pool, key));
    if (!kv) return kv.error();
    if (!*kv) return std::optional<FixedClaim>{};
    auto c = parse_fixed_claim(key, **kv);
    if (!c) {
        // Neither taken over nor replaced: what it holds is not known to be nobody's.
        return make_error(Code::kInvalidConfig,
                          "the fixed claim " + (*kv)->key + " holds " + (*kv)->value +
                              ", which is not a claim (written by hand or damaged; `shmipamctl "
                              "cluster ls` lists it): put back the claim or delete the key");
    }
    return std::optional<FixedClaim>{c};
}

Expected<FixedClaim> FixedClaims::take(const std::string& pool, const std::string& key,
                                       const std::string& node, uint64_t keep_idle,
                                       const Pick& pick, std::string* moved_from,
                                       const Usable& usable) {
    // An address record naming this claim, seen by the previous pass's listing.
    std::optional<std::pair<engine::IpAddress, int64_t>> named_ours;
    for (int attempt = 0; attempt < kTries; ++attempt) {
        auto held = read(pool, key);
        if (!held) return held.error();
        if (*held && (*held)->node == node && !usable((*held)->address)) {
            // This node's own claim only (another node's may be in use there, and this node's
            // view of the pool may be older): given up at the revision read, with its address
            // record; the next pass makes a new claim on an allocatable address.
            auto gone = remove(pool, **held);
            if (!gone) return gone.error();
            continue;
        }
        if (*held && (*held)->node == node) {
            if ((*held)->keep_idle == keep_idle && (*held)->idle_since_unix_s == 0) return **held;
            // In use again, under the policy the pod asks for now: rewritten at the revision read.
            FixedClaim c = **held;
            auto done =
                kv_.txn({{claim_key(pool, key), KvStore::Compare::Target::kMod, c.mod_revision}},
                        {{claim_key(pool, key), value_of(c.address, node, keep_idle).dump()}});
            if (!done) return done.error();
            if (!*done) continue;
            c.keep_idle = keep_idle;
            c.idle_since_unix_s = 0;
            c.mod_revision = kv_.last_header().revision;
            return c;
        }
        if (!*held && named_ours) {
            // The listing named this claim and the claim is still absent: an address record
            // whose claim was deleted alone (by hand). The claim is created on it, if the
            // record is unchanged since; else the next pass looks afresh.
            const auto [a, revision] = *named_ours;
            named_ours.reset();
            const json v = value_of(a, node, keep_idle);
            auto done = kv_.txn({{claim_key(pool, key), KvStore::Compare::Target::kCreate, 0},
                                 {address_key(pool, a), KvStore::Compare::Target::kMod, revision}},
                                {{claim_key(pool, key), v.dump()}});
            if (!done) return done.error();
            if (*done) return FixedClaim{key, a, node, kv_.last_header().revision, keep_idle};
            continue;
        }
        if (*held) {
            // Another node's: taken over at the revision read (a node that took it meanwhile
            // makes this fail, and the next pass sees whose it is now).
            const json v = value_of((*held)->address, node, keep_idle);
            auto done = kv_.txn(
                {{claim_key(pool, key), KvStore::Compare::Target::kMod, (*held)->mod_revision}},
                {{claim_key(pool, key), v.dump()}});
            if (!done) return done.error();
            if (*done) {
                if (moved_from != nullptr) *moved_from = (*held)->node;
                FixedClaim c = **held;
                c.node = node;
                c.keep_idle = keep_idle;
                c.idle_since_unix_s = 0;
                c.mod_revision = kv_.last_header().revision;
                return c;
            }
            continue;
        }
        // A new claim: an address no claim holds, both keys created at once.
        auto taken_kvs = kv_.get_prefix(keys::addresses(prefix_, pool));
        if (!taken_kvs) return taken_kvs.error();
        std::set<std::string> taken;
        for (const KeyValue& kv : *taken_kvs) {
            const std::string address = kv.key.substr(kv.key.rfind('/') + 1);
            taken.insert(address);
            if (record_names(kv, key)) {
                if (auto a = engine::IpAddress::parse(address))
                    named_ours = {{*a, kv.mod_revision}};
            }
        }
        // The claim was created after it was read (the same pod starting on another node at
        // once): its address is among the taken ones, and perhaps the last one free. The next
        // pass reads it and takes it over, where picking would have found none left.
        if (named_ours) continue;
        const std::optional<engine::IpAddress> a = pick(taken);
        if (!a) {
            return make_error(Code::kNoAddressFree,
                              "no address of pool " + pool + " is left for a fixed address");
        }
        const json v = value_of(*a, node, keep_idle);
        auto done = kv_.txn({{claim_key(pool, key), KvStore::Compare::Target::kCreate, 0},
                             {address_key(pool, *a), KvStore::Compare::Target::kCreate, 0}},
                            {{claim_key(pool, key), v.dump()},
                             {address_key(pool, *a), json{{"claim", key}}.dump()}});
        if (!done) return done.error();
        if (*done) return FixedClaim{key, *a, node, kv_.last_header().revision, keep_idle};
        // Lost: the address or the claim was created meanwhile (perhaps by this very call's
        // earlier attempt, which then reads as ours on the next pass).
    }
    return make_error(Code::kTryAgainLater,
                      "the fixed-address claim " + key + " kept changing while being taken");
}

Expected<bool> FixedClaims::give_up(const std::string& pool, const std::string& key,
                                    const std::string& node,
                                    const std::function<bool()>& unheld_here) {
    auto held = read(pool, key);
    // A claim that does not parse is not known to be this node's: left for an operator.
    if (!held && held.error().code == Code::kInvalidConfig) return false;
    if (!held) return held.error();
    if (!*held || (*held)->node != node) return false;
    // Asked after the read, under the node's pool lock: an ADD of the pod on this node has
    // either made its local claim (kept) or not yet taken the claim (it finds it gone).
    if (!unheld_here()) return false;
    return remove(pool, **held);
}

Expected<bool> FixedClaims::mark_idle(const std::string& pool, const FixedClaim& c,
                                      uint64_t since_unix_s) {
    if (c.idle_since_unix_s != 0) return false;  // idle already: from its first second
    return kv_.txn(
        {{claim_key(pool, c.key), KvStore::Compare::Target::kMod, c.mod_revision}},
        {{claim_key(pool, c.key), value_of(c.address, c.node, c.keep_idle, since_unix_s).dump()}});
}

Expected<std::optional<FixedClaim>> FixedClaims::get(const std::string& pool,
                                                     const std::string& key) {
    return read(pool, key);
}

Expected<bool> FixedClaims::remove(const std::string& pool, const FixedClaim& c) {
    // The address record goes with the claim only while it names this claim, compared at the
    // revision read: a record another claim holds (it took the address after the record was
    // deleted alone, by hand) stays, or its address would be free for a third pod.
    auto record = kv_.get(address_key(pool, c.address));
    if (!record) return record.error();
    std::vector<KvStore::Compare> compares{
        {claim_key(pool, c.key), KvStore::Compare::Target::kMod, c.mod_revision}};
    std::vector<KvStore::Write> writes{{claim_key(pool, c.key), std::nullopt}};
    if (*record && record_names(**record, c.key)) {
        compares.push_back({address_key(pool, c.address), KvStore::Compare::Target::kMod,
                            (*record)->mod_revision});
        writes.push_back({address_key(pool, c.address), std::nullopt});
    }
    return kv_.txn(compares, writes);
}

Expected<std::vector<FixedClaim>> FixedClaims::all(const std::string& pool,
                                                   std::vector<std::string>* unreadable) {
    const std::string p = keys::claims(prefix_, pool);
    auto kvs = kv_.get_prefix(p);
    if (!kvs) return kvs.error();
    std::vector<FixedClaim> out;
    for (const KeyValue& kv : *kvs) {
        if (auto c = parse_fixed_claim(kv.key.substr(p.size()), kv)) {
            out.push_back(*c);
        } else if (unreadable != nullptr) {
            unreadable->push_back(kv.key);
        }
    }
    return out;
}

Expected<std::vector<std::pair<std::string, FixedClaim>>> FixedClaims::everywhere(
    std::vector<std::string>* unreadable) {
    auto kvs = kv_.get_prefix(keys::pools(prefix_));
    if (!kvs) return kvs.error();
    std::vector<std::pair<std::string, FixedClaim>> out;
    for (const KeyValue& kv : *kvs) {
        auto k = keys::split(prefix_, kv.key, keys::kClaims);
        if (!k) continue;
        if (auto c = parse_fixed_claim(k->rest, kv)) {
            out.emplace_back(k->pool, *c);
        } else if (unreadable != nullptr) {
            unreadable->push_back(kv.key);
        }
    }
    return out;
}

}  // namespace shmipam::cluster
