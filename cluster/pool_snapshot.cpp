#include "cluster/pool_snapshot.h"

#include "cluster/key_schema.h"

namespace shmipam::cluster {

Expected<PoolSnapshot> read_pool_snapshot(KvStore& store, const std::string& prefix,
                                          const std::string& pool, uint64_t now) {
    // The trailing '/' keeps pool "a" from reading pool "ab"'s keys.
    auto kvs = store.get_prefix(keys::pools(prefix) + pool + "/");
    if (!kvs) return kvs.error();
    PoolSnapshot out;
    // The geometry first (the meta key sorts after the blocks): blocks are read by it.
    for (const KeyValue& kv : *kvs) {
        if (kv.key == keys::meta(prefix, pool)) out.geometry = BlockStore::parse_geometry(kv);
    }
    for (const KeyValue& kv : *kvs) {
        if (kv.key == keys::meta(prefix, pool)) {
            continue;
        } else if (auto b = keys::split(prefix, kv.key, keys::kBlocks)) {
            if (auto block = BlockStore::parse(kv, out.geometry)) out.blocks.push_back(*block);
        } else if (auto i = keys::split(prefix, kv.key, keys::kIdle)) {
            if (auto idle = parse_idle(i->rest, kv)) out.idle.push_back(*idle);
        } else if (auto w = keys::split(prefix, kv.key, keys::kWaiting)) {
            if (auto waiter = parse_waiter(w->rest, kv, now)) out.waiters.push_back(*waiter);
        }
    }
    return out;
}

}  // namespace shmipam::cluster
