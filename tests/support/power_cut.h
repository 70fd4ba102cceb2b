// A power cut, simulated from the storage trace (tracing_file_system.h) that plugin processes of a
// test build write: applied to a copy of the data directory at a chosen point of the trace, it
// takes back every change made after that point, drops a random subset of what was not yet
// durable at it, and keeps everything that was.
//   - a write with no later sync of its file: kept or zeroed (each one on its own coin);
//   - a file whose name no later directory sync covers: kept or gone;
//   - a file with no sync after it appeared: its content kept or all zero;
//   - an unlink no later directory sync covers: done or undone (the file comes back as saved).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace shmipam::testing {

struct TraceEvent {
    char kind = 0;
    std::string path, saved;  // B and A: path is the command, saved the container id
    uint64_t off = 0, len = 0;
};

inline std::vector<TraceEvent> read_trace(const std::string& trace) {
    std::vector<TraceEvent> ev;
    std::ifstream in(trace);
    for (std::string line; std::getline(in, line);) {
        std::istringstream ls(line);
        TraceEvent e;
        ls >> e.kind >> e.path;
        if (e.kind == 'W') ls >> e.off >> e.len;
        if (e.kind == 'U' || e.kind == 'B' || e.kind == 'A') ls >> e.saved;
        if (!e.path.empty()) ev.push_back(e);
    }
    return ev;
}

// What the runtime knew when the power went at event `cut`: for each attachment, whether the
// last operation begun on it had answered (then its outcome is certain) or not.
struct KnownAtCut {
    std::map<std::string, std::string> answered;  // container id -> "ADD" or "DEL"
    std::set<std::string> uncertain;
};

inline KnownAtCut known_at(const std::vector<TraceEvent>& ev, size_t cut) {
    std::map<std::string, std::pair<std::string, bool>> last;  // id -> (command, answered)
    for (size_t i = 0; i < cut && i < ev.size(); ++i) {
        if (ev[i].kind == 'B') last[ev[i].saved] = {ev[i].path, false};
        if (ev[i].kind == 'A' && last[ev[i].saved].first == ev[i].path) {
            last[ev[i].saved].second = true;
        }
    }
    KnownAtCut k;
    for (const auto& [id, op] : last) {
        if (op.second) {
            k.answered[id] = op.first;
        } else {
            k.uncertain.insert(id);
        }
    }
    return k;
}

struct PowerCut {
    size_t undone = 0;  // changes made after the cut, taken back
    size_t writes_dropped = 0;
    size_t names_lost = 0;
    size_t contents_lost = 0;
    size_t unlinks_undone = 0;
};

// Applies a power cut at event `cut` to the copy of from_root at to_root. Changes traced after
// the cut never happened; of those before it, what no sync before the cut covered is kept or
// lost on a coin.
inline PowerCut cut_power(const std::vector<TraceEvent>& ev, size_t cut,
                          const std::string& from_root, const std::string& to_root,
                          std::mt19937& rng) {
    cut = std::min(cut, ev.size());
    // Syncs before the cut, by file and by directory: the event indexes, in order.
    std::map<std::string, std::vector<size_t>> syncs, dir_syncs;
    for (size_t i = 0; i < cut; ++i) {
        if (ev[i].kind == 'S') syncs[ev[i].path].push_back(i);
        if (ev[i].kind == 'D') dir_syncs[ev[i].path].push_back(i);
    }
    auto synced_after = [](const std::map<std::string, std::vector<size_t>>& m,
                           const std::string& p, size_t i) {
        auto it = m.find(p);
        return it != m.end() && it->second.back() > i;
    };
    auto dir_of = [](const std::string& p) { return p.substr(0, p.rfind('/')); };
    auto mapped = [&](const std::string& p) {
        return p.rfind(from_root, 0) == 0 ? to_root + p.substr(from_root.size()) : std::string();
    };
    auto coin = [&] { return rng() % 2 == 0; };
    auto zero_range = [](const std::string& path, uint64_t off, uint64_t len) {
        const int fd = ::open(path.c_str(), O_WRONLY);
        if (fd < 0) return;
        const std::vector<char> zero(len, 0);
        (void)::pwrite(fd, zero.data(), zero.size(), off_t(off));
        ::close(fd);
    };

    PowerCut out;
    // Backwards, so a file's later changes are taken back before its earlier ones.
    for (size_t i = ev.size(); i-- > 0;) {
        const TraceEvent& e = ev[i];
        const std::string target = mapped(e.path);
        if (target.empty()) continue;
        const bool after = i >= cut;
        if (e.kind == 'U') {
            const bool undo = after || (!synced_after(dir_syncs, dir_of(e.path), i) && coin());
            if (undo && !std::filesystem::exists(target)) {
                std::filesystem::copy_file(e.saved, target);
                (after ? out.undone : out.unlinks_undone)++;
            }
        } else if (e.kind == 'C' && std::filesystem::exists(target)) {
            if (after || (!synced_after(dir_syncs, dir_of(e.path), i) && coin())) {
                std::filesystem::remove(target);
                (after ? out.undone : out.names_lost)++;
            } else if (!synced_after(syncs, e.path, i) && coin()) {
                const auto size = std::filesystem::file_size(target);
                std::filesystem::resize_file(target, 0);
                std::filesystem::resize_file(target, size);
                ++out.contents_lost;
            }
        } else if (e.kind == 'W' && std::filesystem::exists(target)) {
            if (after) {
                zero_range(target, e.off, e.len);
                ++out.undone;
            } else if (!synced_after(syncs, e.path, i) && coin()) {
                zero_range(target, e.off, e.len);
                ++out.writes_dropped;
            }
        }
    }
    return out;
}

}  // namespace shmipam::testing
