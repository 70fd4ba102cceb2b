#include "tools/render/cluster.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace shmipam::tools {

using nlohmann::json;

json cluster_ls_json(const std::string& node, const std::vector<ClusterBlockRow>& rows,
                     const ClusterLsNotes& notes) {
    json blocks = json::array();
    size_t problems = 0;
    for (const auto& r : rows) {
        json b{{"pool", r.pool},
               {"block", r.block},
               {"owner", r.owner.empty() ? json(nullptr) : json(r.owner)},
               {"cached", r.cached},
               {"localInUse", r.local_use ? json(*r.local_use) : json(nullptr)}};
        if (!r.problem.empty()) {
            b["problem"] = r.problem;
            ++problems;
        }
        blocks.push_back(std::move(b));
    }
    json waiting = json::array(), idle = json::array(), moved = json::array();
    for (const auto& w : notes.waiting) {
        waiting.push_back({{"pool", w.pool}, {"node", w.node}, {"secondsAgo", w.seconds_ago}});
    }
    for (const auto& i : notes.idle) {
        idle.push_back(
            {{"pool", i.pool}, {"block", i.block}, {"node", i.node}, {"idleS", i.idle_s}});
    }
    for (const auto& m : notes.moved) {
        moved.push_back({{"pool", m.pool},
                         {"claim", m.claim},
                         {"owner", m.owner},
                         {"container", m.container},
                         {"why", m.why}});
    }
    problems += notes.moved.size() + notes.unreadable.size();
    return {{"node", node},        {"blocks", blocks}, {"waiting", waiting},
            {"idle", idle},        {"moved", moved},   {"unreadable", notes.unreadable},
            {"problems", problems}};
}

std::string cluster_ls_text(const std::string& node, const std::vector<ClusterBlockRow>& rows,
                            const ClusterLsNotes& notes) {
    size_t wp = 4, wb = 5, wo = 5;
    for (const auto& r : rows) {
        wp = std::max(wp, r.pool.size());
        wb = std::max(wb, r.block.size());
        wo = std::max(wo, r.owner.size());
    }
    std::string out = "this node: " + node + "\n";
    char line[512];
    std::snprintf(line, sizeof line, "%-*s  %-*s  %-*s  %-6s  %-8s  %s\n", int(wp), "POOL", int(wb),
                  "BLOCK", int(wo), "OWNER", "CACHED", "IN USE", "PROBLEM");
    out += line;
    size_t problems = 0;
    for (const auto& r : rows) {
        const std::string use = r.local_use ? std::to_string(*r.local_use) : "-";
        std::snprintf(line, sizeof line, "%-*s  %-*s  %-*s  %-6s  %-8s  ", int(wp), r.pool.c_str(),
                      int(wb), r.block.c_str(), int(wo), r.owner.empty() ? "-" : r.owner.c_str(),
                      r.cached ? "yes" : "no", use.c_str());
        out += line + (r.problem.empty() ? "-" : r.problem) + "\n";
        problems += !r.problem.empty();
    }
    for (const auto& w : notes.waiting) {
        out += "waiting for a block of " + w.pool + ": node " + w.node + " (last tried " +
               std::to_string(w.seconds_ago) + " s ago)\n";
    }
    for (const auto& i : notes.idle) {
        out +=
            "idle: " + i.pool + " " + i.block + " of node " + i.node + ", no address in use for " +
            std::to_string(i.idle_s) + " s" +
            (notes.waiting.empty() ? " (no node waits for a block)"
                                   : " (given back at its node's next pass while a node waits)") +
            "\n";
    }
    for (const auto& m : notes.moved) {
        out += "moved: " + m.pool + " " + m.claim + ": " + m.why + ", and sandbox " + m.container +
               " here still uses it\n";
    }
    for (const auto& k : notes.unreadable) out += "unreadable store value: " + k + "\n";
    problems += notes.moved.size() + notes.unreadable.size();
    out += std::to_string(rows.size()) + " blocks, " + std::to_string(problems) +
           (problems == 1 ? " disagreement\n" : " disagreements\n");
    return out;
}

json cluster_pass_json(const std::string& node, const std::vector<PassRow>& rows) {
    json blocks = json::array();
    for (const auto& r : rows) {
        json row{{"pool", r.pool}, {"block", r.block}};
        switch (r.action) {
            case PassRow::Action::kAdopted:
                row["action"] = "adopted";
                break;
            case PassRow::Action::kDropped:
                row["action"] = "dropped";
                row["owner"] = r.owner;
                row["inUse"] = r.in_use;
                break;
            case PassRow::Action::kGaveBack:
                row["action"] = "gave back";
                row["waiters"] = r.waiters;
                if (!r.why.empty()) row["why"] = r.why;
                break;
            case PassRow::Action::kHealed:
                row["action"] = "healed";
                break;
            case PassRow::Action::kMoved:
                row["action"] = "moved";
                row["owner"] = r.owner;
                row["container"] = r.container;
                row["why"] = r.why;
                break;
            case PassRow::Action::kFailed:
                row["action"] = "failed";
                row["why"] = r.why;
                break;
        }
        blocks.push_back(std::move(row));
    }
    return {{"node", node}, {"blocks", blocks}};
}

std::string cluster_pass_text(const std::string& node, const std::vector<PassRow>& rows) {
    std::string out;
    for (const auto& r : rows) {
        switch (r.action) {
            case PassRow::Action::kAdopted:
                out +=
                    "adopted " + r.pool + " " + r.block + ": the store gives it to " + node + "\n";
                break;
            case PassRow::Action::kGaveBack: {
                std::string who;
                for (const auto& w : r.waiters) who += (who.empty() ? "" : ", ") + w;
                out += "gave back " + r.pool + " " + r.block + ": " +
                       (who.empty() ? r.why : "idle, and " + who + " waited for a block") + "\n";
                break;
            }
            case PassRow::Action::kHealed:
                out += "healed " + r.pool + ": " + r.block + " that dead invocations left\n";
                break;
            case PassRow::Action::kMoved:
                out +=
                    "moved " + r.pool + " " + r.block + ": " + r.why + ", and sandbox " +
                    r.container + " here still uses it (delete it" +
                    (r.owner.empty() || r.owner == node ? std::string(")\n")
                                                        : ": its pod runs on " + r.owner + ")\n");
                break;
            case PassRow::Action::kFailed:
                out += "failed " + r.pool + ": " + r.why + "\n";
                break;
            case PassRow::Action::kDropped:
                out += "dropped " + r.pool + " " + r.block + ": " +
                       (r.owner.empty() ? std::string("owned by no node") : "owned by " + r.owner) +
                       " in the store";
                if (r.in_use != 0) {
                    out += "; " + std::to_string(r.in_use) +
                           " addresses still in use here (their pods may share them with another "
                           "node's: restart them)";
                }
                out += "\n";
                break;
        }
    }
    if (rows.empty()) out += "node " + node + ": every cached block is the store's\n";
    return out;
}

std::string cluster_pass_metrics(const std::string& node, const std::vector<PassRow>& rows,
                                 const std::vector<std::string>& pools, uint64_t now_unix_s) {
    std::map<std::string, uint64_t> moved, lost, failed;
    for (const auto& p : pools) moved[p] = lost[p] = failed[p] = 0;
    for (const auto& r : rows) {
        if (r.action == PassRow::Action::kMoved) ++moved[r.pool];
        if (r.action == PassRow::Action::kDropped) lost[r.pool] += r.in_use;
        if (r.action == PassRow::Action::kFailed) failed[r.pool] = 1;
    }
    std::string out =
        "# HELP shmipam_cluster_moved_claims_in_use Fixed claims another node holds now while a "
        "sandbox on this node still uses them (delete those sandboxes).\n"
        "# TYPE shmipam_cluster_moved_claims_in_use gauge\n";
    for (const auto& [pool, n] : moved) {
        out += "shmipam_cluster_moved_claims_in_use{node=\"" + node + "\",pool=\"" + pool + "\"} " +
               std::to_string(n) + "\n";
    }
    out +=
        "# HELP shmipam_cluster_lost_block_addresses_in_use Addresses in use on this node in "
        "blocks the store gives another node or none.\n"
        "# TYPE shmipam_cluster_lost_block_addresses_in_use gauge\n";
    for (const auto& [pool, n] : lost) {
        out += "shmipam_cluster_lost_block_addresses_in_use{node=\"" + node + "\",pool=\"" + pool +
               "\"} " + std::to_string(n) + "\n";
    }
    out +=
        "# HELP shmipam_cluster_pass_pool_failed 1 when the last node pass failed on the pool "
        "(its error is on the pass's stderr).\n"
        "# TYPE shmipam_cluster_pass_pool_failed gauge\n";
    for (const auto& [pool, n] : failed) {
        out += "shmipam_cluster_pass_pool_failed{node=\"" + node + "\",pool=\"" + pool + "\"} " +
               std::to_string(n) + "\n";
    }
    out +=
        "# HELP shmipam_cluster_pass_last_success_seconds When the node pass last ran through.\n"
        "# TYPE shmipam_cluster_pass_last_success_seconds gauge\n"
        "shmipam_cluster_pass_last_success_seconds{node=\"" +
        node + "\"} " + std::to_string(now_unix_s) + "\n";
    return out;
}

json cluster_gc_json(const std::vector<GcBlockRow>& rows, bool applied) {
    json blocks = json::array();
    for (const auto& r : rows) {
        json row{{"pool", r.pool}, {"block", r.block}, {"node", r.node}, {"released", r.released}};
        if (!r.kept.empty()) row["kept"] = r.kept;
        blocks.push_back(std::move(row));
    }
    return {{"applied", applied}, {"blocks", blocks}};
}

std::string cluster_gc_text(const std::vector<GcBlockRow>& rows, bool applied) {
    std::string out;
    size_t releasable = 0;
    for (const auto& r : rows) {
        if (!r.kept.empty()) {
            out += "keep " + r.pool + " " + r.block + " of node " + r.node + " (" + r.kept + ")\n";
            continue;
        }
        ++releasable;
        const char* what = !applied     ? "would release"
                           : r.released ? "released"
                                        : "left (changed since read)";
        out += std::string(what) + " " + r.pool + " " + r.block + " of node " + r.node + "\n";
    }
    if (rows.empty()) out += "every block belongs to a live node\n";
    if (!applied && releasable != 0) out += "dry run: --apply releases them\n";
    return out;
}

}  // namespace shmipam::tools
