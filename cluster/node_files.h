// The files a node keeps for its pools in cluster mode, named and judged in one place, and the
// one function that takes a pool's lock. Per pool:
//
//   <dataDir>/_cluster/<pool>.lock         the pool lock: one cluster helper of a node and pool
//                                          at a time (flock; the holder may hand it to a helper
//                                          as its fd 3)
//   <dataDir>/_cluster/<pool>.blocks       the block cache (cluster/block_cache.h)
//   <dataDir>/_cluster/<pool>.release/     release marks (cluster/release_due.h)
//   <dataDir>/_cluster/<pool>.unavailable  touched by a helper that found etcd unreachable: the
//                                          helpers and ADDs that waited for the lock meanwhile
//                                          fail at once with its message
//   <dataDir>/_cluster/<pool>.ahead-none   touched by a helper that found no block to claim:
//                                          ADDs do not claim ahead for a while
//   <runDir>/_cluster/<pool>.reconciled    on tmpfs, so gone at a reboot: the node's first ADD
//                                          of the pool since it booted has had its cache checked
//                                          against the store
//
// A marker counts by its mtime on the wall clock; a time further ahead of the clock than
// kClockSlackS is from before the clock was stepped back, and counts as stale, never binding.
#pragma once

#include <ctime>
#include <optional>
#include <set>
#include <string>

#include "base/file_lock.h"
#include "base/status.h"

namespace shmipam::cluster {

// How far ahead of the clock a marker's time may be and still count: two processes' reads of the
// clock a few seconds apart, never a clock stepped back.
inline constexpr time_t kClockSlackS = 5;
// After a helper found etcd unreachable, ADDs do not start a reconcile helper for this long: each
// would wait a whole etcd budget for the same answer, while the cache serves meanwhile.
inline constexpr time_t kUnavailableQuietS = 30;
// After a helper found no block to claim (the pool taken, the node at its cap), ADDs do not claim
// ahead for this long: a helper per ADD would only ask etcd the same question again.
inline constexpr time_t kAheadNoneQuietS = 60;
// A release helper that could not decide (etcd down, the arena unreadable) is started again by a
// DEL no sooner than this: every DEL starting one would pile helpers up on the lock.
inline constexpr time_t kReleaseRetryS = 30;
// A wait for the pool lock lasts at most this many etcd budgets (ipam.etcd.budgetMs): a holder
// makes a bounded number of store calls in a row, each bounded by the budget (a block claim
// about seven: the list, the geometry, a create per block tried, the waiting marks, the list
// again; the node pass a few per block), so a longer wait means a holder that is stuck.
inline constexpr uint64_t kLockWaitBudgets = 8;

struct NodeFiles {
    std::string state_dir;  // <dataDir>/_cluster
    std::string run_dir;    // <runDir>/_cluster

    std::string lock(const std::string& pool) const { return state_dir + "/" + pool + ".lock"; }
    std::string block_cache(const std::string& pool) const;
    std::string unavailable(const std::string& pool) const {
        return state_dir + "/" + pool + ".unavailable";
    }
    std::string ahead_none(const std::string& pool) const {
        return state_dir + "/" + pool + ".ahead-none";
    }
    std::string reconciled(const std::string& pool) const {
        return run_dir + "/" + pool + ".reconciled";
    }
};

// The pools a node caches blocks of (<state_dir>/<pool>.blocks), `state_dir` being its
// NodeFiles::state_dir.
std::set<std::string> cached_pools(const std::string& state_dir);

// mkdir -p; errors show when the directory is used.
void make_dirs(const std::string& dir);
// Creates the file (with `text`) or sets its time to now.
void touch(const std::string& path, const std::string& text = "");
// Whether `path` was touched within the last `seconds`.
bool touched_within(const std::string& path, time_t seconds);
// Whether `path` was touched at or after `since` (a CLOCK_REALTIME reading).
bool touched_since(const std::string& path, const timespec& since);
// Code 50 with the message a helper left in `files.unavailable(pool)`, when it touched it at or
// after `since` (while the caller waited for the pool lock): ADDs and helpers that pile up on a
// node when etcd has no quorum each wait at most for the holder's budget, not for every
// earlier one's as well.
std::optional<Error> unavailable_since(const NodeFiles& files, const std::string& pool,
                                       const timespec& since);

// The pool lock (base/file_lock.h): one cluster helper of a node and pool at a time.
class PoolLock : public base::FileLock {
  public:
    // Waits at most wait_ms for it: code 11 (try again later) naming the file after that. Makes
    // the lock file's directory.
    static Expected<PoolLock> acquire(const std::string& path, uint64_t wait_ms);
    // Held now, or nullopt: another holder is at work.
    static std::optional<PoolLock> try_acquire(const std::string& path);
    // The lock a caller handed over on descriptor `fd` (already held).
    static PoolLock adopt(int fd) { return PoolLock(base::FileLock::adopt(fd)); }

  private:
    explicit PoolLock(base::FileLock&& held) : base::FileLock(std::move(held)) {}
};

}  // namespace shmipam::cluster
