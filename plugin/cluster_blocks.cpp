#include "plugin/cluster_blocks.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <set>

#include "base/write_all.h"
#include "cluster/block_cache.h"
#include "cluster/release_due.h"
#include "engine/inspect/inspect.h"

extern char** environ;

namespace shmipam::cni {

using nlohmann::json;

namespace {

// How far ahead of the clock a marker's time may be and still count (a clock stepped back by
// more makes it stale, not binding).
constexpr time_t kClockSlackS = 5;

// The answer of another helper of the node and pool that found etcd unreachable while this
// invocation waited for the pool's lock (since `started`), if one did.
std::optional<Error> found_unavailable_while_waiting(const std::string& dir,
                                                     const std::string& pool,
                                                     const timespec& started) {
    struct stat marker {};
    // (A time ahead of the clock is from before the clock was stepped back: not meant for us.)
    if (::stat((dir + "/" + pool + ".unavailable").c_str(), &marker) == 0 &&
        (marker.st_mtim.tv_sec > started.tv_sec ||
         (marker.st_mtim.tv_sec == started.tv_sec && marker.st_mtim.tv_nsec >= started.tv_nsec)) &&
        marker.st_mtim.tv_sec <= std::time(nullptr) + kClockSlackS) {
        return make_error(Code::kUnavailable,
                          "etcd unavailable (found by another cluster helper on this node "
                          "while this invocation waited; see its error for the endpoints)");
    }
    return std::nullopt;
}

// shmipam-cluster beside the running plugin, unless the config names one.
std::string helper_path(const ClusterMode& cm) {
    if (!cm.helper.empty()) return cm.helper;
    char self[PATH_MAX] = {};
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    std::string dir = n > 0 ? std::string(self, size_t(n)) : std::string();
    dir = dir.substr(0, dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
    return dir + "/shmipam-cluster";
}

// Runs the helper with `input` on its stdin; its stdout, or why it could not run.
// mkdir -p (errors show up when the directory is used).
void make_dirs(const std::string& dir) {
    for (size_t at = dir.find('/', 1);; at = dir.find('/', at + 1)) {
        ::mkdir(dir.substr(0, at).c_str(), 0755);
        if (at == std::string::npos) return;
    }
}

// Writes the helper's request: a helper that died before reading must not kill the plugin with
// SIGPIPE.
void write_ignoring_sigpipe(int fd, const std::string& input) {
    struct sigaction ignore {
    }, before{};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &before);
    (void)write_all(fd, input);
    ::sigaction(SIGPIPE, &before, nullptr);
}

// `lock_fd` (>= 0): the pool's helper lock, held, handed to the helper as its fd 3.
Expected<std::string> run_helper(const std::string& path, const std::string& input,
                                 int lock_fd = -1) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0)
        return make_error(Code::kIo, "pipe: " + std::string(std::strerror(errno)));
    if (::pipe2(out, O_CLOEXEC) != 0) {
        ::close(in[0]);
        ::close(in[1]);
        return make_error(Code::kIo, "pipe: " + std::string(std::strerror(errno)));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    if (lock_fd >= 0) posix_spawn_file_actions_adddup2(&fa, lock_fd, 3);
    char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, path.c_str(), &fa, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) {
        ::close(in[1]);
        ::close(out[0]);
        return make_error(Code::kIo, "cannot run the cluster helper " + path + ": " +
                                         std::strerror(rc) +
                                         " (install shmipam-cluster beside the plugin, or set "
                                         "ipam.clusterHelper)");
    }
    write_ignoring_sigpipe(in[1], input);
    ::close(in[1]);
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        text.append(buf, size_t(n));
    }
    ::close(out[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status)) {
        return make_error(Code::kInternal, "the cluster helper " + path + " was killed by signal " +
                                               std::to_string(WTERMSIG(status)));
    }
    if (text.empty()) {
        return make_error(Code::kInternal, "the cluster helper " + path + " answered nothing",
                          "exit status " + std::to_string(WEXITSTATUS(status)));
    }
    return text;
}

}  // namespace

std::string cluster_state_dir(const NetConf& nc) {
    return nc.network.data_dir + "/_cluster";
}

pools::IpSet OwnBlocks::all() const {
    pools::IpSet out = kept;
    for (const auto& i : marked.intervals()) out.add(i.first, i.last);
    return out;
}

Expected<OwnBlocks> in_own_blocks(const NetConf& nc, const std::string& pool,
                                  const pools::IpSet& usable) {
    const std::string dir = cluster_state_dir(nc);
    auto blocks = cluster::read_block_cache(cluster::block_cache_path(dir, pool));
    if (!blocks) return blocks.error();
    std::set<std::string> marked;  // one getdents when none is
    for (const auto& due : cluster::read_release_due(dir, pool)) {
        marked.insert(due.block.to_string());
    }
    OwnBlocks out{pools::IpSet(usable.family()), pools::IpSet(usable.family())};
    for (const auto& b : *blocks) {
        if (b.cidr.address.family != usable.family()) continue;
        pools::IpSet& to = marked.count(b.cidr.to_string()) ? out.marked : out.kept;
        const pools::IpSet in_block = usable.intersect(b.cidr);
        for (const auto& i : in_block.intervals()) to.add(i.first, i.last);
    }
    return out;
}

namespace {

// The helper's request for a block of `pool` (docs: tools/cluster_helper.cpp).
json helper_request(const NetConf& nc, const std::string& pool, const engine::Cidr& cidr,
                    const pools::IpSet& usable, const std::optional<engine::IpAddress>& address) {
    const ClusterMode& cm = *nc.pool_mode->cluster;
    json req{
        {"etcd", cm.etcd},
        {"pool", pool},
        {"cidr", engine::Cidr{cidr.network(), cidr.prefix}.to_string()},
        {"blockPrefix", cidr.address.family == engine::Family::kV4 ? nc.network.block_prefix_v4
                                                                   : nc.network.block_prefix_v6},
        {"node", nc.pool_mode->node_name},
        {"maxBlocks", cm.max_blocks},
        {"stateDir", cluster_state_dir(nc)}};
    if (address) req["address"] = address->to_string();
    json seen = json::array();
    auto cached = cluster::read_block_cache(cluster::block_cache_path(cluster_state_dir(nc), pool));
    if (cached) {
        for (const auto& b : *cached) seen.push_back(b.cidr.to_string());
    }
    req["seen"] = seen;
    json ranges = json::array();
    for (const auto& i : usable.intervals()) {
        ranges.push_back(engine::IpAddress{i.first, usable.family()}.to_string() + "-" +
                         engine::IpAddress{i.last, usable.family()}.to_string());
    }
    req["usable"] = ranges;
    return req;
}

// Starts the helper in its own session with `input` on stdin, /dev/null for its output, and
// `lock_fd` (the pool's lock, held; or -1: the helper waits for the lock) as its fd 3; never
// waited for: it outlives the plugin, and
// the runtime, which waits for the plugin's output to close, does not wait for it.
void spawn_detached(const std::string& path, const std::string& input, int lock_fd) {
    int in[2];
    if (::pipe2(in, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    if (lock_fd >= 0) posix_spawn_file_actions_adddup2(&fa, lock_fd, 3);  // clears FD_CLOEXEC
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, path.c_str(), &fa, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    if (rc == 0) write_ignoring_sigpipe(in[1], input);
    ::close(in[1]);
}

}  // namespace

void claim_ahead(const NetConf& nc, const std::string& pool, const engine::Cidr& cidr,
                 const pools::IpSet& usable, const pools::IpSet& here,
                 engine::NetworkStore& store) {
    const ClusterMode& cm = *nc.pool_mode->cluster;
    if (cm.claim_ahead_percent == 0 || here.empty()) return;
    const int bits = here.family() == engine::Family::kV4 ? 32 : 128;
    const int prefix = here.family() == engine::Family::kV4 ? nc.network.block_prefix_v4
                                                            : nc.network.block_prefix_v6;
    const engine::u128 block_size = engine::u128{1} << (bits - prefix);
    engine::u128 free = here.count();
    for (const auto& i : here.intervals()) {
        auto taken = engine::hinted_taken(store, {i.first, here.family()}, {i.last, here.family()});
        if (!taken) return;
        free -= std::min<engine::u128>(free, *taken);
    }
    if (free * 100 > block_size * (100 - cm.claim_ahead_percent)) return;
    const std::string dir = cluster_state_dir(nc);
    // A helper found nothing to claim a short while ago: asking again each ADD would only cost.
    struct stat none {};
    if (::stat((dir + "/" + pool + ".ahead-none").c_str(), &none) == 0 &&
        none.st_mtime + 60 > std::time(nullptr) &&
        none.st_mtime <= std::time(nullptr) + kClockSlackS) {
        return;
    }
    // Held now, or not at all: another helper of the pool is at work, and its block will do.
    const int lock =
        ::open((dir + "/" + pool + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock < 0) return;
    if (::flock(lock, LOCK_EX | LOCK_NB) == 0) {
        json req = helper_request(nc, pool, cidr, usable, std::nullopt);
        req["ahead"] = true;
        req["lockFd"] = 3;
        spawn_detached(helper_path(cm), req.dump(), lock);
    }
    ::close(lock);  // the lock stays with the helper, which shares the open file
}

void reconcile_after_boot(const NetConf& nc, const std::string& pool, const engine::Cidr& cidr,
                          const pools::IpSet& usable) {
    const std::string marker_dir = nc.network.run_dir + "/_cluster";
    const std::string marker = marker_dir + "/" + pool + ".reconciled";
    struct stat st {};
    if (::stat(marker.c_str(), &st) == 0) return;
    // Etcd found unreachable within the last half minute: not asked again by every ADD (each
    // would wait a budget); the cache serves meanwhile.
    const std::string unavailable = cluster_state_dir(nc) + "/" + pool + ".unavailable";
    const time_t now = std::time(nullptr);
    if (::stat(unavailable.c_str(), &st) == 0 && st.st_mtime + 30 > now &&
        st.st_mtime <= now + kClockSlackS) {
        return;
    }
    json req = helper_request(nc, pool, cidr, usable, std::nullopt);
    req["refresh"] = true;
    auto out = run_helper(helper_path(*nc.pool_mode->cluster), req.dump());
    const json ans = out ? json::parse(*out, nullptr, false) : json();
    if (!ans.is_object() || ans.contains("code")) {
        // Not reconciled (etcd unreachable, say): the cache serves as it is until a later ADD
        // gets through (or a claim or release rewrites the cache from the store).
        std::fprintf(stderr, "shmipam: the node's blocks of %s not checked against etcd: %s\n",
                     pool.c_str(), out ? out->c_str() : out.error().msg.c_str());
        return;
    }
    make_dirs(marker_dir);
    const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) ::close(fd);
}

namespace {

// The helper's answer printed as `out`, or its error.
Expected<json> helper_answer(const std::string& out) {
    json ans = json::parse(out, nullptr, false);
    if (ans.is_discarded() || !ans.is_object()) {
        return make_error(Code::kInternal, "the cluster helper answered something that is not JSON",
                          out);
    }
    if (ans.contains("code")) {
        return make_error(Code(ans.value("code", 999)), ans.value("msg", ""),
                          ans.value("details", ""));
    }
    return ans;
}

// The helper's answer to `req`, or its error.
Expected<json> ask_helper(const NetConf& nc, const json& req) {
    auto out = run_helper(helper_path(*nc.pool_mode->cluster), req.dump());
    if (!out) return out.error();
    return helper_answer(*out);
}

}  // namespace

Expected<std::unique_ptr<PoolHelperLock>> PoolHelperLock::acquire(const NetConf& nc,
                                                                  const std::string& pool) {
    const std::string dir = cluster_state_dir(nc);
    timespec started{};
    ::clock_gettime(CLOCK_REALTIME, &started);
    make_dirs(dir);
    const std::string path = dir + "/" + pool + ".lock";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) {
        const int e = errno;
        if (fd >= 0) ::close(fd);
        return make_error(Code::kIo, "cannot lock " + path + ": " + std::strerror(e));
    }
    // ADDs piling up behind a helper that found etcd unreachable fail at once, each not waiting
    // a budget of its own after every earlier one's (the helper, handed the lock, starts its
    // clock after the wait and would not see it).
    if (auto e = found_unavailable_while_waiting(dir, pool, started)) {
        ::close(fd);
        return *e;
    }
    return std::unique_ptr<PoolHelperLock>(new PoolHelperLock(fd));
}

PoolHelperLock::~PoolHelperLock() {
    ::close(fd_);
}

Expected<engine::IpAddress> take_fixed_address(const NetConf& nc, const std::string& pool,
                                               const engine::Cidr& cidr, const pools::IpSet& usable,
                                               const std::string& claim_key,
                                               const PoolHelperLock& held) {
    json req = helper_request(nc, pool, cidr, usable, std::nullopt);
    req["fixed"] = claim_key;
    req["lockFd"] = 3;
    auto out = run_helper(helper_path(*nc.pool_mode->cluster), req.dump(), held.fd());
    if (!out) return out.error();
    auto ans = helper_answer(*out);
    if (!ans) return ans.error();
    auto a = engine::IpAddress::parse(ans->value("address", ""));
    if (!a)
        return make_error(Code::kInternal, "the cluster helper answered no address", ans->dump());
    return *a;
}

Status give_up_fixed_address(const NetConf& nc, const std::string& pool,
                             const std::string& claim_key, const std::string& pool_state,
                             const std::string& ifname) {
    const ClusterMode& cm = *nc.pool_mode->cluster;
    const json req{{"etcd", cm.etcd},
                   {"pool", pool},
                   {"node", nc.pool_mode->node_name},
                   {"stateDir", cluster_state_dir(nc)},
                   {"unfix", claim_key},
                   {"poolState", pool_state},
                   {"ifname", ifname}};
    auto ans = ask_helper(nc, req);
    if (!ans) return ans.error();
    return Ok{};
}

bool still_own(const NetConf& nc, const std::string& pool,
               const std::vector<engine::AllocatedAddress>& addresses) {
    auto blocks = cluster::read_block_cache(cluster::block_cache_path(cluster_state_dir(nc), pool));
    if (!blocks) return false;
    for (const auto& a : addresses) {
        bool in = false;
        for (const auto& b : *blocks) {
            in = in || (b.cidr.address.family == a.address.family && b.cidr.contains(a.address));
        }
        if (!in) return false;
    }
    return true;
}

void after_del(const NetConf& nc, const std::string& pool,
               const std::vector<engine::IpAddress>& released, engine::NetworkStore& store) {
    const ClusterMode& cm = *nc.pool_mode->cluster;
    const std::string dir = cluster_state_dir(nc);
    auto blocks = cluster::read_block_cache(cluster::block_cache_path(dir, pool));
    if (!blocks || blocks->size() < 2) return;  // the node keeps one block per pool
    const uint64_t now = uint64_t(std::time(nullptr));
    for (const auto& a : released) {
        for (const auto& b : *blocks) {
            if (b.cidr.address.family != a.family || !b.cidr.contains(a)) continue;
            auto in_use = engine::in_use_in_block(store, a);
            if (in_use && *in_use == 0) {
                // From when its addresses have cooled; the helper adds the block's minimum age.
                cluster::write_release_due(dir, pool, b.cidr,
                                           now + (nc.network.reuse_delay_ms + 999) / 1000);
            }
        }
    }
    for (const cluster::ReleaseDue& due : cluster::read_release_due(dir, pool)) {
        if (due.due_unix_s > now) continue;
        // The helper takes the pool's lock itself, waiting while another helper of the pool
        // (an ADD's claim) holds it. Started only when the lock was free, a release was left
        // for the node's next DEL, which may never come: under a storm of claims every
        // release was dropped so.
        // Not started again by every DEL if this helper cannot decide (etcd down, say): it
        // removes or rewrites the mark when it does.
        cluster::write_release_due(dir, pool, due.block, now + 30);
        json req{{"etcd", cm.etcd},
                 {"pool", pool},
                 {"node", nc.pool_mode->node_name},
                 {"stateDir", dir},
                 {"release", due.block.to_string()},
                 {"poolState", store.dir()},
                 {"minAgeS", cm.block_min_age_s}};
        spawn_detached(helper_path(cm), req.dump(), -1);
        return;  // one at a time: the next DEL starts the next
    }
}

Expected<bool> claim_block(const NetConf& nc, const std::string& pool, const engine::Cidr& cidr,
                           const pools::IpSet& usable,
                           const std::optional<engine::IpAddress>& address, std::string* why) {
    const ClusterMode& cm = *nc.pool_mode->cluster;
    json req = helper_request(nc, pool, cidr, usable, address);
    // Helpers of a node and pool take turns. Wait for the turn here, not in a helper exec'd
    // for nothing: when twenty ADDs find the node's blocks full at once, the first one's helper
    // claims a block, and the nineteen after it see the block in the cache and exec nothing
    // (or, when it found etcd unreachable meanwhile, answer that at once).
    const std::string dir = cluster_state_dir(nc);
    timespec started{};
    ::clock_gettime(CLOCK_REALTIME, &started);
    make_dirs(dir);  // the first claim of a node: no _cluster directory yet
    const int lock =
        ::open((dir + "/" + pool + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock < 0 || ::flock(lock, LOCK_EX) != 0) {
        const int e = errno;
        if (lock >= 0) ::close(lock);
        return make_error(Code::kIo,
                          "cannot lock " + dir + "/" + pool + ".lock: " + std::strerror(e));
    }
    if (auto e = found_unavailable_while_waiting(dir, pool, started)) {
        ::close(lock);
        return *e;
    }
    if (!address) {
        std::set<std::string> seen;
        for (const auto& b : req["seen"]) seen.insert(b.get<std::string>());
        auto now = cluster::read_block_cache(cluster::block_cache_path(dir, pool));
        for (const auto& b : now ? *now : std::vector<cluster::OwnedBlock>{}) {
            if (seen.count(b.cidr.to_string()) == 0) {
                ::close(lock);
                return true;  // another ADD's helper claimed it while this one waited
            }
        }
    }
    req["lockFd"] = 3;
    auto out = run_helper(helper_path(cm), req.dump(), lock);
    ::close(lock);
    if (!out) return out.error();
    const json ans = json::parse(*out, nullptr, false);
    if (ans.is_discarded() || !ans.is_object()) {
        return make_error(Code::kInternal, "the cluster helper answered something that is not JSON",
                          *out);
    }
    if (ans.contains("code")) {
        return make_error(Code(ans.value("code", 999)), ans.value("msg", ""),
                          ans.value("details", ""));
    }
    if (!ans.contains("claimed") || ans["claimed"].is_null()) {
        *why = ans.value("atCap", false)
                   ? "node " + nc.pool_mode->node_name + " holds its maximum of " +
                         std::to_string(cm.max_blocks) + " blocks (ipam.maxBlocksPerNode)"
                   : "no block of " + pool + " is left in the cluster";
        return false;
    }
    return true;
}

}  // namespace shmipam::cni
