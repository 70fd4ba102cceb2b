#include "cluster/agent.h"

#include <ctime>
#include <optional>

#include "cluster/etcd_config.h"

namespace shmipam::cluster::agent {

namespace {

bool lock_handed_over(const protocol::Request& r) {
    if (const auto* c = std::get_if<protocol::ClaimBlock>(&r)) return c->lock_handed_over;
    if (const auto* f = std::get_if<protocol::Refresh>(&r)) return f->lock_handed_over;
    if (const auto* t = std::get_if<protocol::TakeFixed>(&r)) return t->lock_handed_over;
    return false;
}

template <class T>
Expected<Answer> as_answer(Expected<T> r) {
    if (!r) return r.error();
    return Answer{std::move(*r)};
}

Expected<Answer> dispatch(const protocol::Request& request, const Context& c) {
    if (const auto* r = std::get_if<protocol::ClaimBlock>(&request)) {
        return as_answer(claim_or_refresh(c, r->geometry, r));
    }
    if (const auto* r = std::get_if<protocol::Refresh>(&request)) {
        return as_answer(claim_or_refresh(c, r->geometry, nullptr));
    }
    if (const auto* r = std::get_if<protocol::TakeFixed>(&request)) {
        return as_answer(take_fixed(c, *r));
    }
    if (const auto* r = std::get_if<protocol::GiveUpFixed>(&request)) {
        return as_answer(give_up_fixed(c, *r));
    }
    if (const auto* r = std::get_if<protocol::GiveUpUnheld>(&request)) {
        return as_answer(give_up_unheld(c, *r));
    }
    if (const auto* r = std::get_if<protocol::ReadFixed>(&request)) {
        return as_answer(read_fixed(c, *r));
    }
    return as_answer(release(c, std::get<protocol::ReleaseBlock>(request)));
}

// Steps 3 and 4 of serve(), under the lock.
Expected<Answer> serve_locked(const protocol::Request& request, KvStore& kv,
                              const NodeFiles& files) {
    const protocol::Scope& scope = protocol::scope_of(request);
    Guards guards;
    guards.cluster_id = Guards::ClusterId::kRemember;
    auto store = GuardedStore::open(kv, etcd_prefix(scope.etcd), scope.state_dir, guards);
    if (!store) return store.error();
    auto answer = dispatch(request, Context{scope, files, *store});
    // Before the answer: a caller told "done" finds it remembered.
    (void)store->remember_revision();
    return answer;
}

}  // namespace

Expected<Answer> serve(const protocol::Request& request, KvStore& kv, const LockTaking& taking) {
    const protocol::Scope& scope = protocol::scope_of(request);
    const NodeFiles files{scope.state_dir, ""};
    timespec started{};
    ::clock_gettime(CLOCK_REALTIME, &started);
    std::optional<PoolLock> lock;
    if (lock_handed_over(request) && taking.handed_fd >= 0) {
        lock = PoolLock::adopt(taking.handed_fd);
    } else {
        auto got = PoolLock::acquire(files.lock(scope.pool), taking.wait_ms);
        if (!got) return got.error();
        lock = std::move(*got);
    }
    if (auto e = unavailable_since(files, scope.pool, started)) return *e;
    auto answer = serve_locked(request, kv, files);
    if (!answer && answer.error().code == Code::kUnavailable) {
        touch(files.unavailable(scope.pool), answer.error().msg + "\n");
    }
    return answer;
}

nlohmann::json answer_json(const Answer& answer) {
    return std::visit([](const auto& a) { return protocol::to_json(a); }, answer);
}

}  // namespace shmipam::cluster::agent
