// Which idle node gives a block back for the nodes waiting for one (docs/cluster.md, "No node
// shut out"). Each idle node's pass decides alone, from what the store says, so the rule must
// keep the give-backs to about one per waiting node even when every idle node's pass runs at
// once (without it, one waiting node made every idle node give its block back):
//
//   1. A waiter that could claim an unclaimed block of the pool now needs no give-back: its next
//      try claims it. The unclaimed blocks are shared out one per waiter; the waiters left
//      over, and those no unclaimed block serves, are the waiters unserved.
//   2. The idle holders (nodes other than the waiters, with a block recorded idle for at least
//      blockMinAgeS), in the order of their names: the first `unserved` of them give one block
//      back each; the others give none.
//
// Passes that run one after another see a block given back as unclaimed (rule 1); passes that
// run at once read the same records and agree on the order (rule 2). So N waiting nodes cause
// at most N give-backs per round of passes. A holder whose pass stopped while its idle record
// stays keeps its place in the order: the waiter then waits until that record goes (the node's
// pass runs again and clears or acts on it, or `cluster gc` releases a dead node's blocks).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "cluster/waiting.h"
#include "engine/addr/ip_address.h"

namespace shmipam::cluster {

// The unclaimed blocks of the pool `w` could claim, in its claim order, at most `enough` of them:
// the pool cut as `pool_cidr` into /`block_prefix` blocks, less the blocks in `claimed` (CIDRs),
// those with no address the waiter could allocate skipped.
std::set<std::string> free_blocks_for(const Waiter& w, const engine::Cidr& pool_cidr,
                                      int block_prefix, const std::set<std::string>& claimed,
                                      size_t enough);

// Rule 1: how many of the waiters no unclaimed block serves, given the blocks each could claim.
size_t waiters_unserved(const std::vector<std::set<std::string>>& free_per_waiter);

// Rule 2: whether `node` is among the first `unserved` of `holders` by name.
bool gives_back(const std::string& node, const std::set<std::string>& holders, size_t unserved);

}  // namespace shmipam::cluster
