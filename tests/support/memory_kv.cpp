#include "tests/support/memory_kv.h"

#include <algorithm>

namespace shmipam::testing {

using cluster::CreateResult;
using cluster::KeyValue;

namespace {

bool under(const std::string& key, const std::string& prefix) {
    return key.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

Status MemoryKv::enter(const std::string& call, const std::string& key) {
    if (etcd_.before_call && !etcd_.in_before_call_) {
        etcd_.in_before_call_ = true;
        etcd_.before_call(call, key);
        etcd_.in_before_call_ = false;
    }
    ++etcd_.calls_;
    if (etcd_.failing_calls_ > 0) {
        --etcd_.failing_calls_;
        return make_error(Code::kUnavailable,
                          "etcd unavailable: no endpoint answered (a planted failure)");
    }
    return Ok{};
}

void MemoryKv::answered() {
    header_.cluster_id = etcd_.cluster_id_;
    header_.member_id = 1;
    header_.revision = etcd_.state_.revision;
    header_.highest_revision = std::max(header_.highest_revision, header_.revision);
}

Expected<std::optional<KeyValue>> MemoryKv::get(const std::string& key) {
    if (auto st = enter("get", key); !st) return st.error();
    answered();
    const auto it = etcd_.state_.keys.find(key);
    if (it == etcd_.state_.keys.end()) return std::optional<KeyValue>{};
    return std::optional<KeyValue>{it->second};
}

Expected<std::vector<KeyValue>> MemoryKv::get_prefix(const std::string& prefix) {
    if (auto st = enter("get_prefix", prefix); !st) return st.error();
    answered();
    std::vector<KeyValue> out;
    for (auto it = etcd_.state_.keys.lower_bound(prefix);
         it != etcd_.state_.keys.end() && under(it->first, prefix); ++it) {
        out.push_back(it->second);
    }
    return out;
}

Expected<bool> MemoryKv::any_under(const std::string& prefix) {
    if (auto st = enter("any_under", prefix); !st) return st.error();
    answered();
    const auto it = etcd_.state_.keys.lower_bound(prefix);
    return it != etcd_.state_.keys.end() && under(it->first, prefix);
}

void MemoryKv::apply(const std::vector<Write>& writes) {
    MemoryEtcd::State& s = etcd_.state_;
    const int64_t revision = s.revision + 1;
    bool changed = false;
    for (const Write& w : writes) {
        if (w.value) {
            KeyValue& kv = s.keys[w.key];
            if (kv.create_revision == 0) {
                kv.key = w.key;
                kv.create_revision = revision;
            }
            kv.value = *w.value;
            kv.mod_revision = revision;
            ++kv.version;
            changed = true;
        } else if (w.whole_prefix) {
            auto it = s.keys.lower_bound(w.key);
            while (it != s.keys.end() && under(it->first, w.key)) {
                it = s.keys.erase(it);
                changed = true;
            }
        } else {
            changed = s.keys.erase(w.key) != 0 || changed;
        }
    }
    if (changed) s.revision = revision;
}

bool MemoryKv::holds(const Compare& c) const {
    const auto revision_of = [&](const KeyValue* kv) {
        if (kv == nullptr) return int64_t{0};
        return c.target == Compare::Target::kCreate ? kv->create_revision : kv->mod_revision;
    };
    const auto& keys = etcd_.state_.keys;
    if (!c.whole_prefix) {
        const auto it = keys.find(c.key);
        return revision_of(it == keys.end() ? nullptr : &it->second) == c.revision;
    }
    bool any = false;
    for (auto it = keys.lower_bound(c.key); it != keys.end() && under(it->first, c.key); ++it) {
        any = true;
        if (revision_of(&it->second) != c.revision) return false;
    }
    return any || revision_of(nullptr) == c.revision;
}

Expected<int64_t> MemoryKv::put(const std::string& key, const std::string& value) {
    if (auto st = enter("put", key); !st) return st.error();
    apply({{key, value}});
    answered();
    return header_.revision;
}

Expected<CreateResult> MemoryKv::create_if_absent(const std::string& key,
                                                  const std::string& value) {
    if (auto st = enter("create_if_absent", key); !st) return st.error();
    CreateResult out;
    const auto it = etcd_.state_.keys.find(key);
    if (it == etcd_.state_.keys.end()) {
        apply({{key, value}});
        out.created = true;
        answered();
        out.revision = header_.revision;
        return out;
    }
    answered();
    out.held = it->second;
    // As EtcdClient: exactly our value is an earlier attempt of this call.
    if (out.held->value == value) {
        out.created = true;
        out.revision = out.held->mod_revision;
    }
    return out;
}

Expected<bool> MemoryKv::delete_at(const std::string& key, int64_t mod_revision) {
    if (auto st = enter("delete_at", key); !st) return st.error();
    const bool unchanged =
        holds({key, Compare::Target::kMod, mod_revision}) && etcd_.state_.keys.count(key) != 0;
    if (unchanged) apply({{key, std::nullopt}});
    answered();
    return unchanged;
}

Expected<bool> MemoryKv::txn(const std::vector<Compare>& compares,
                             const std::vector<Write>& writes) {
    const std::string first = !compares.empty() ? compares.front().key
                              : !writes.empty() ? writes.front().key
                                                : std::string();
    if (auto st = enter("txn", first); !st) return st.error();
    bool all = true;
    for (const Compare& c : compares) all = all && holds(c);
    if (all) apply(writes);
    answered();
    return all;
}

}  // namespace shmipam::testing
