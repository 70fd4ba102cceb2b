#include "ipam/owner_claims.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <cstdio>
#include <map>
#include <memory>

#include "engine/addr/fingerprint.h"
#include "ipam/helper_exec.h"
#include "ipam/pod_lookup.h"
#include "ipam/pool_catalog.h"
#include "ipam/pool_state.h"
#include "kube/pod_protocol.h"
#include "pools/sticky.h"

namespace shmipam::ipam {

namespace {

namespace protocol = kube::protocol;

// The node's last walk: its mtime, under <runDir> (a reboot starts afresh, which only checks
// sooner). Its lock keeps two invocations from walking at once.
constexpr const char* kRecheckMarker = ".statefulset-recheck";

std::string marker_path(const Request& r) {
    return r.network.run_dir + "/" + kRecheckMarker;
}

// One claim kept while its set wants its pod, found idle in opened[state].
struct OwnedClaim {
    size_t state = 0;
    engine::Fingerprint fp;
    pools::StickyIdentity id;
    pools::SetMember member;
};

using SetKey = std::pair<std::string, std::string>;  // namespace, set

// The sets of `claims` as the API server gives them now; a set missing from the map could not
// be read (its claims are kept).
std::map<SetKey, pools::SetState> read_sets(const KubernetesApi& api,
                                            const std::vector<OwnedClaim>& claims) {
    protocol::ReadStatefulSets ask{{api.kubeconfig, api.budget_ms}, {}};
    std::map<SetKey, pools::SetState> out;
    for (const OwnedClaim& c : claims) {
        const SetKey k{c.id.namespace_, c.member.set};
        if (out.emplace(k, pools::SetState{}).second) ask.sets.push_back({k.first, k.second});
    }
    out.clear();
    if (ask.sets.empty()) return out;
    auto text = run_helper(kube_helper_path(api), protocol::encode(ask), -1,
                           "ipam.kubernetes.helper");
    auto answer = text ? protocol::statefulsets_answer(*text)
                       : Expected<protocol::StatefulSetsAnswer>(text.error());
    if (!answer) {
        std::fprintf(stderr,
                     "shmipam: could not read the StatefulSets of idle fixed claims (kept until "
                     "the next check): %s\n",
                     answer.error().msg.c_str());
        return out;
    }
    for (const auto& s : answer->sets) {
        out[{s.namespace_, s.name}] =
            pools::SetState{s.exists, s.deleting, s.ordinals_start, s.replicas};
    }
    return out;
}

// Frees each claim whose set no longer wants its pod; the source is told per state (in cluster
// mode a fixed-address pool gives the store's claim up).
void release_unwanted(const Request& r, std::vector<OpenState>& opened,
                      const std::vector<OwnedClaim>& claims, AddressSource& source) {
    const auto sets = read_sets(*r.kubernetes, claims);
    std::map<size_t, size_t> released;  // state -> claims freed
    for (const OwnedClaim& c : claims) {
        auto set = sets.find({c.id.namespace_, c.member.set});
        if (set == sets.end() || pools::statefulset_wants(set->second, c.member.ordinal)) continue;
        auto gone = opened[c.state].allocator().release_claims(
            [&](const engine::ClaimView& v) { return v.fp == c.fp; }, /*in_use_too=*/false,
            /*dry_run=*/false);
        if (gone && !gone->empty()) released[c.state] += gone->size();
    }
    for (const auto& [state, n] : released) {
        OpenState& s = opened[state];
        (void)source.after_gc(object_name_of_state(s.name), n, *s.store);
    }
}

// The idle claims of opened[state] kept while their set wants the pod, that `accept` takes.
template <typename Accept>
void collect(std::vector<OpenState>& opened, size_t state, Accept accept,
             std::vector<OwnedClaim>& out) {
    if (!opened[state].store) return;
    for (const engine::ClaimView& v : opened[state].allocator().claims()) {
        if (v.keep_idle != format::kKeepIdleWhileOwnerWants ||
            v.use != engine::ClaimView::Use::kIdle) {
            continue;
        }
        auto id = pools::identity_of_key(v.key);
        if (!id || id->kind != pools::StickyKind::kStatefulSet) continue;
        // A key longer than the entry keeps reads back truncated: its fingerprint says so.
        if (!(engine::fingerprint(v.key, id->ifname) == v.fp)) continue;
        auto member = pools::statefulset_member(id->name);
        if (!member || !accept(v, *id)) continue;
        out.push_back({state, v.fp, *id, *member});
    }
}

// Whether the node's last walk is older than the period; then the marker is touched (under its
// lock: one walker at a time) and true is returned.
bool claim_the_walk(const Request& r) {
    const int fd = ::open(marker_path(r).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    bool due = false;
    struct stat st {};
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::fstat(fd, &st) == 0) {
        const time_t now = ::time(nullptr);
        // A new marker (empty) has never been walked.
        due = st.st_size == 0 || now - st.st_mtime >= time_t(r.kubernetes->recheck_s) ||
              st.st_mtime > now + time_t(r.kubernetes->recheck_s);  // a clock set back
        if (due) {
            if (st.st_size == 0) (void)!::write(fd, "1", 1);
            (void)::futimens(fd, nullptr);
        }
    }
    ::close(fd);
    return due;
}

bool walk_due(const Request& r) {
    struct stat st {};
    if (::stat(marker_path(r).c_str(), &st) != 0) return true;
    const time_t now = ::time(nullptr);
    return st.st_size == 0 || now - st.st_mtime >= time_t(r.kubernetes->recheck_s) ||
           st.st_mtime > now + time_t(r.kubernetes->recheck_s);
}

void walk(const Request& r) {
    if (!claim_the_walk(r)) return;
    auto catalog = load_catalog(r);
    if (!catalog) return;
    std::vector<OpenState> opened;
    (void)open_every_state(r, **catalog, opened);
    std::vector<OwnedClaim> claims;
    for (size_t i = 0; i < opened.size(); ++i) {
        collect(opened, i, [](const engine::ClaimView&, const pools::StickyIdentity&) { return true; },
                claims);
    }
    if (claims.empty()) return;
    auto source = make_source(r);
    release_unwanted(r, opened, claims, *source);
}

}  // namespace

void release_unwanted_after_del(const Request& r, std::vector<OpenState>& opened,
                                AddressSource& source) {
    if (!r.kubernetes || !pools::statefulset_member(r.pod.name)) return;
    std::vector<OwnedClaim> claims;
    for (size_t i = 0; i < opened.size(); ++i) {
        collect(
            opened, i,
            [&](const engine::ClaimView&, const pools::StickyIdentity& id) {
                return id.namespace_ == r.pod.namespace_ && id.name == r.pod.name &&
                       id.ifname == r.key.ifname;
            },
            claims);
    }
    if (!claims.empty()) release_unwanted(r, opened, claims, source);
}

void schedule_owner_recheck(const Request& r, Upkeep& upkeep) {
    if (!r.kubernetes || !r.pools || !walk_due(r)) return;
    auto kept = std::make_shared<const Request>(r);
    auto before = std::move(upkeep.after_answer);
    upkeep.after_answer = [kept, before = std::move(before)] {
        if (before) before();
        walk(*kept);
    };
}

}  // namespace shmipam::ipam
