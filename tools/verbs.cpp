#include "tools/verbs.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "engine/ops/allocator.h"
#include "engine/inspect/inspect.h"
#include "engine/recovery/repair.h"
#include "engine/state/network_store.h"
#include "engine/recovery/recovery.h"
#include "base/clock.h"
#include "tools/metrics.h"
#include "tools/render_svg.h"
#include "tools/render_text.h"

namespace shmipam::tools {

using nlohmann::json;

namespace {

int cannot_read(const Error& e) {
    std::cerr << "shmipamctl: " << e.msg << (e.details.empty() ? "" : " (" + e.details + ")")
              << "\n";
    return kExitCannotRead;
}

bool valid_network_name(const std::string& n) {
    return !n.empty() && n.find('/') == std::string::npos && n[0] != '.';
}

Expected<std::unique_ptr<engine::NetworkStore>> open_network(const Options& o, shm::Access a) {
    if (!valid_network_name(o.network)) {
        return make_error(Code::kInvalidConfig, "invalid network name \"" + o.network + "\"");
    }
    const std::string dir = o.run_dir + "/" + o.network;
    if (::access(dir.c_str(), F_OK) != 0) {
        return make_error(Code::kIo, "no network \"" + o.network + "\" under " + o.run_dir);
    }
    return engine::NetworkStore::open_existing(dir, a);
}

std::vector<std::string> networks_under(const std::string& run_dir, std::string* error) {
    std::vector<std::string> out;
    DIR* d = ::opendir(run_dir.c_str());
    if (d == nullptr) {
        *error = "cannot read " + run_dir + ": " + std::strerror(errno);
        return out;
    }
    while (dirent* ent = ::readdir(d)) {
        const std::string n = ent->d_name;
        if (!valid_network_name(n)) continue;
        if (::access((run_dir + "/" + n + "/" + shm::IndexFile::kFileName).c_str(), F_OK) == 0) {
            out.push_back(n);
        }
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

json released_json(const std::vector<engine::ReleasedAttachment>& rs) {
    json out = json::array();
    for (const auto& r : rs) {
        json a = json::array();
        for (const auto& x : r.addresses) a.push_back(x.to_string());
        out.push_back({{"containerID", r.container_id},
                       {"ifname", r.ifname},
                       {"pod", r.pod},
                       {"addresses", a}});
    }
    return out;
}

int report_released(const Options& o, const Expected<std::vector<engine::ReleasedAttachment>>& r) {
    if (!r) return cannot_read(r.error());
    if (o.json) {
        std::cout << json{{"applied", o.apply}, {"released", released_json(*r)}}.dump(2) << "\n";
    } else {
        for (const auto& a : *r) {
            std::string addrs;
            for (const auto& x : a.addresses) addrs += (addrs.empty() ? "" : ",") + x.to_string();
            std::cout << (o.apply ? "released " : "would release ") << a.container_id << "/"
                      << a.ifname << (a.pod.empty() ? "" : " (pod " + a.pod + ")") << ": " << addrs
                      << "\n";
        }
        std::cout << r->size()
                  << (o.apply ? " attachments released"
                              : " attachments would be released (dry run; --apply to act)")
                  << "\n";
    }
    return o.apply || r->empty() ? kExitClean : kExitViolations;
}

}  // namespace

int cmd_dump(const Options& o) {
    auto store = open_network(o, shm::Access::kReadOnly);
    if (!store) return cannot_read(store.error());
    auto d = engine::dump(**store);
    if (!d) return cannot_read(d.error());
    std::vector<engine::SlotView> kept;
    for (const auto& s : d->slots) {
        if (!o.state.empty() && s.state != o.state) continue;
        if (!o.container.empty() && s.container_id.rfind(o.container, 0) != 0) continue;
        if (!o.pod.empty() && s.pod != o.pod) continue;
        if (!o.address.empty() && s.address.to_string() != o.address) continue;
        kept.push_back(s);
    }
    d->slots = std::move(kept);
    std::cout << (o.json ? dump_to_json(*d).dump(2) + "\n" : dump_to_table(*d));
    return kExitClean;
}

int cmd_verify(const Options& o) {
    auto store = open_network(o, shm::Access::kReadOnly);
    if (!store) return cannot_read(store.error());
    auto rep = engine::verify(**store);
    if (!rep) return cannot_read(rep.error());
    std::cout << (o.json ? verify_to_json(*rep).dump(2) + "\n" : verify_to_text(*rep));
    return rep->violations.empty() ? kExitClean : kExitViolations;
}

int cmd_ls(const Options& o) {
    std::string err;
    const auto names = networks_under(o.run_dir, &err);
    if (!err.empty()) {
        std::cerr << "shmipamctl: " << err << "\n";
        return kExitCannotRead;
    }
    json out = json::array();
    for (const auto& n : names) {
        Options one = o;
        one.network = n;
        auto store = open_network(one, shm::Access::kReadOnly);
        if (!store) {
            out.push_back({{"network", n}, {"error", store.error().msg}});
            continue;
        }
        auto d = engine::dump(**store);
        if (!d) {
            out.push_back({{"network", n}, {"error", d.error().msg}});
            continue;
        }
        json blocks = json::array();
        uint64_t slots = 0, in_use = 0, cooling = 0;
        for (const auto& b : d->blocks) {
            blocks.push_back({{"cidr", b.cidr},
                              {"inUse", b.in_use},
                              {"cooling", b.cooling},
                              {"slots", b.slots}});
            slots += b.slots;
            in_use += b.in_use;
            cooling += b.cooling;
        }
        out.push_back({{"network", n},
                       {"dataDir", d->data_dir},
                       {"ranges", d->ranges},
                       {"reuseDelayMs", d->reuse_delay_ms},
                       {"blocks", blocks},
                       {"addresses", slots},
                       {"inUse", in_use},
                       {"cooling", cooling}});
    }
    if (o.json) {
        std::cout << out.dump(2) << "\n";
        return kExitClean;
    }
    std::printf("%-24s %-32s %7s %8s %8s %6s\n", "NETWORK", "DATADIR", "BLOCKS", "IN USE",
                "COOLING", "USED");
    for (const auto& n : out) {
        if (n.contains("error")) {
            std::printf("%-24s %s\n", n["network"].get<std::string>().c_str(),
                        ("unreadable: " + n["error"].get<std::string>()).c_str());
            continue;
        }
        const double used = n["addresses"].get<uint64_t>()
                                ? 100.0 * n["inUse"].get<double>() / n["addresses"].get<double>()
                                : 0;
        std::printf("%-24s %-32s %7zu %8llu %8llu %5.1f%%\n",
                    n["network"].get<std::string>().c_str(),
                    n["dataDir"].get<std::string>().c_str(), n["blocks"].size(),
                    (unsigned long long)n["inUse"].get<uint64_t>(),
                    (unsigned long long)n["cooling"].get<uint64_t>(), used);
        std::printf("  ranges %s; reuseDelay %.1fs\n", n["ranges"].get<std::string>().c_str(),
                    n["reuseDelayMs"].get<double>() / 1000);
        for (const auto& b : n["blocks"]) {
            std::printf("  %-22s %6llu in use, %4llu cooling of %llu\n",
                        b["cidr"].get<std::string>().c_str(),
                        (unsigned long long)b["inUse"].get<uint64_t>(),
                        (unsigned long long)b["cooling"].get<uint64_t>(),
                        (unsigned long long)b["slots"].get<uint64_t>());
        }
    }
    return kExitClean;
}

int cmd_stats(const Options& o) {
    auto store = open_network(o, shm::Access::kReadOnly);
    if (!store) return cannot_read(store.error());
    auto d = engine::dump(**store);
    if (!d) return cannot_read(d.error());
    json blocks = json::array();
    uint64_t claims = 0, releases = 0, retries = 0, rollbacks = 0, slots = 0, in_use = 0;
    for (const auto& b : d->blocks) {
        blocks.push_back(block_json(b));
        claims += b.claims;
        releases += b.releases;
        retries += b.cas_retries;
        rollbacks += b.rollbacks;
        slots += b.slots;
        in_use += b.in_use;
    }
    json out{{"network", d->network},
             {"adds", d->adds},
             {"dels", d->dels},
             {"claims", claims},
             {"releases", releases},
             {"casRetries", retries},
             {"rollbacks", rollbacks},
             {"deadLeasesReaped", d->dead_leases_reaped},
             {"busyRejections", d->busy_rejections},
             {"rebootReclaims", d->reboot_reclaims},
             {"leasesHeld", d->leases.size()},
             {"utilisation", slots ? double(in_use) / double(slots) : 0.0},
             {"ranges", json::array()},
             {"blocks", blocks}};
    for (const auto& r : d->range_views) {
        out["ranges"].push_back(
            {{"rangeSet", r.range_set},
             {"subnet", r.subnet},
             {"range", r.start.to_string() + "-" + r.end.to_string()},
             {"size", r.size},
             {"inUse", r.in_use},
             {"cooling", r.cooling},
             {"utilisation", r.size ? double(r.in_use) / double(r.size) : 0.0}});
    }
    if (o.json) {
        std::cout << out.dump(2) << "\n";
        return kExitClean;
    }
    std::printf(
        "network %s: %llu ADDs, %llu DELs; %llu claims, %llu releases, %llu CAS retries, "
        "%llu rollbacks, %llu dead leases reaped, %llu busy rejections, %zu leases held\n",
        d->network.c_str(), (unsigned long long)d->adds, (unsigned long long)d->dels,
        (unsigned long long)claims, (unsigned long long)releases, (unsigned long long)retries,
        (unsigned long long)rollbacks, (unsigned long long)d->dead_leases_reaped,
        (unsigned long long)d->busy_rejections, d->leases.size());
    for (const auto& r : out["ranges"]) {
        std::printf("  range set %d %s %s: %5.1f%% used (%llu in use, %llu cooling of %llu)\n",
                    r["rangeSet"].get<int>(), r["subnet"].get<std::string>().c_str(),
                    r["range"].get<std::string>().c_str(), 100 * r["utilisation"].get<double>(),
                    (unsigned long long)r["inUse"].get<uint64_t>(),
                    (unsigned long long)r["cooling"].get<uint64_t>(),
                    (unsigned long long)r["size"].get<uint64_t>());
    }
    for (const auto& b : blocks) {
        std::printf("  %-22s %5.1f%% used (%llu in use, %llu cooling of %llu)\n",
                    b["cidr"].get<std::string>().c_str(), 100 * b["utilisation"].get<double>(),
                    (unsigned long long)b["inUse"].get<uint64_t>(),
                    (unsigned long long)b["cooling"].get<uint64_t>(),
                    (unsigned long long)b["slots"].get<uint64_t>());
    }
    return kExitClean;
}

int cmd_metrics(const Options& o) {
    std::vector<std::string> names;
    if (!o.network.empty()) {
        names.push_back(o.network);
    } else {
        std::string err;
        names = networks_under(o.run_dir, &err);
        if (!err.empty()) {
            std::cerr << "shmipamctl: " << err << "\n";
            return kExitCannotRead;
        }
    }
    std::vector<engine::NetworkDump> dumps;
    for (const auto& n : names) {
        Options one = o;
        one.network = n;
        auto store = open_network(one, shm::Access::kReadOnly);
        if (!store) return cannot_read(store.error());
        auto d = engine::dump(**store);
        if (!d) return cannot_read(d.error());
        dumps.push_back(std::move(*d));
    }
    const std::string text = metrics_text(dumps);
    if (o.textfile_dir.empty()) {
        std::cout << text;
        return kExitClean;
    }
    // node_exporter's textfile collector reads *.prom: write aside, rename into place.
    const std::string final_path = o.textfile_dir + "/shmipam.prom";
    const std::string tmp = final_path + ".tmp." + std::to_string(::getpid());
    {
        std::ofstream f(tmp);
        f << text;
        if (!f) {
            std::cerr << "shmipamctl: cannot write " << tmp << "\n";
            return kExitCannotRead;
        }
    }
    if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
        std::cerr << "shmipamctl: cannot rename to " << final_path << ": " << std::strerror(errno)
                  << "\n";
        ::unlink(tmp.c_str());
        return kExitCannotRead;
    }
    return kExitClean;
}

int cmd_render(const Options& o) {
    auto store = open_network(o, shm::Access::kReadOnly);
    if (!store) return cannot_read(store.error());
    auto d = engine::dump(**store);
    if (!d) return cannot_read(d.error());
    if (!o.cidr.empty()) {
        // Blocks of the configured range that nobody needed yet: all free, drawn as such.
        auto c = engine::Cidr::parse(o.cidr);
        if (!c || c->has_host_bits()) {
            std::cerr << "shmipamctl: --cidr wants a network address, not \"" << o.cidr << "\"\n";
            return kExitCannotRead;
        }
        const int prefix = std::max<int>(c->prefix, (*store)->block_prefix(c->address.family));
        const engine::u128 step = engine::u128{1} << (c->address.bits() - prefix);
        std::set<std::string> have;
        for (const auto& b : d->blocks) have.insert(b.cidr);
        for (engine::u128 v = c->network().value; v <= c->last().value && d->blocks.size() < 4096;
             v += step) {
            const std::string cidr =
                engine::IpAddress{v, c->address.family}.to_string() + "/" + std::to_string(prefix);
            if (!have.count(cidr)) {
                engine::BlockView bv;
                bv.cidr = cidr;
                bv.slots = uint64_t(step);
                d->blocks.push_back(bv);
            }
            if (c->last().value - v < step) break;
        }
        std::sort(d->blocks.begin(), d->blocks.end(), [](const auto& x, const auto& y) {
            auto a = engine::Cidr::parse(x.cidr), b = engine::Cidr::parse(y.cidr);
            return a->address < b->address;
        });
    }
    std::cout << render_svg(*d);
    return kExitClean;
}

int cmd_release(const Options& o) {
    auto store = open_network(o, shm::Access::kReadWrite);
    if (!store) return cannot_read(store.error());
    (*store)->act_as_invocation();
    engine::NetworkConfig none;
    engine::Allocator alloc(**store, none);
    if (!o.address.empty()) {
        auto a = engine::IpAddress::parse(o.address);
        if (!a) {
            std::cerr << "shmipamctl: not an address: " << o.address << "\n";
            return kExitCannotRead;
        }
        return report_released(o, alloc.release_address(*a, !o.apply));
    }
    if (!o.container.empty()) {
        return report_released(
            o, alloc.release_where(
                   [&](const format::Entry& e, const engine::Fingerprint&) {
                       const std::string cid(e.container_id,
                                             strnlen(e.container_id, sizeof e.container_id));
                       const std::string ifn(e.ifname, strnlen(e.ifname, sizeof e.ifname));
                       return cid == o.container && (o.ifname.empty() || ifn == o.ifname);
                   },
                   !o.apply));
    }
    if (!o.pod.empty()) {
        return report_released(o, alloc.release_where(
                                      [&](const format::Entry& e, const engine::Fingerprint&) {
                                          return std::string(e.pod, strnlen(e.pod, sizeof e.pod)) ==
                                                 o.pod;
                                      },
                                      !o.apply));
    }
    std::cerr << "shmipamctl: release needs --address, --container or --pod\n";
    return kExitCannotRead;
}

int cmd_gc(const Options& o) {
    std::stringstream ss;
    if (o.valid_file == "-") {
        ss << std::cin.rdbuf();
    } else {
        std::ifstream f(o.valid_file);
        if (!f) {
            std::cerr << "shmipamctl: cannot read " << o.valid_file << "\n";
            return kExitCannotRead;
        }
        ss << f.rdbuf();
    }
    // The CNI GC shape: a list of {"containerID", "ifname"}, or a config holding
    // "cni.dev/valid-attachments".
    json doc = json::parse(ss.str(), nullptr, false);
    if (doc.is_object() && doc.contains("cni.dev/valid-attachments"))
        doc = doc["cni.dev/valid-attachments"];
    if (!doc.is_array()) {
        std::cerr << "shmipamctl: --valid wants a JSON list of {\"containerID\",\"ifname\"}\n";
        return kExitCannotRead;
    }
    std::set<std::pair<uint64_t, uint64_t>> keep;
    for (const auto& a : doc) {
        if (!a.is_object() || !a.contains("containerID") || !a["containerID"].is_string() ||
            !a.contains("ifname") || !a["ifname"].is_string()) {
            std::cerr << "shmipamctl: every valid attachment needs string containerID and ifname\n";
            return kExitCannotRead;
        }
        const auto f = engine::fingerprint(a["containerID"].get<std::string>(),
                                           a["ifname"].get<std::string>());
        keep.insert({f.fp1, f.fp2});
    }
    auto store = open_network(o, shm::Access::kReadWrite);
    if (!store) return cannot_read(store.error());
    (*store)->act_as_invocation();
    engine::NetworkConfig none;
    engine::Allocator alloc(**store, none);
    const uint64_t now = base::unix_ns();
    const uint64_t grace = uint64_t(o.older_than_s * 1e9);
    return report_released(o, alloc.release_where(
                                  [&](const format::Entry& e, const engine::Fingerprint& f) {
                                      if (keep.count({f.fp1, f.fp2})) return false;
                                      return grace == 0 || (now > e.created_unix_ns &&
                                                            now - e.created_unix_ns >= grace);
                                  },
                                  !o.apply));
}

int cmd_repair(const Options& o) {
    const std::string& run_dir = o.run_dir;
    const std::string& network = o.network;
    const bool apply = o.apply;
    if (!valid_network_name(network)) {
        std::cerr << "shmipamctl: invalid network name \"" << network << "\"\n";
        return kExitCannotRead;
    }
    const std::string dir = run_dir + "/" + network;
    const std::string index_path = dir + "/" + shm::IndexFile::kFileName;
    auto store = engine::NetworkStore::open_existing(dir, shm::Access::kReadWrite);
    if (!store) {
        const Code c = store.error().code;
        if (c != Code::kArenaDamaged && c != Code::kArenaVersion && c != Code::kArenaForeign) {
            return cannot_read(store.error());
        }
        std::cout << "index unusable: " << store.error().msg << "\n"
                  << (apply ? "moved" : "would move") << " it aside to index.damaged.<time>; the "
                  << "next invocation rebuilds the network from its journal\n";
        if (!apply) return kExitViolations;
        const std::string aside = index_path + ".damaged." + std::to_string(::time(nullptr));
        if (::rename(index_path.c_str(), aside.c_str()) != 0) {
            std::cerr << "shmipamctl: cannot move " << index_path << ": " << std::strerror(errno)
                      << "\n";
            return kExitCannotRead;
        }
        return 0;
    }
    auto blocks = (*store)->all_blocks();
    if (!blocks) {
        std::cout << "block unusable: " << blocks.error().msg << "\n"
                  << (apply ? "retired" : "would retire") << " the network's state; the next "
                  << "invocation rebuilds it from its journal\n";
        if (!apply) return kExitViolations;
        (*store)->act_as_invocation();
        (void)(*store)->retire("shmipamctl repair: " + blocks.error().msg);
        return 0;
    }
    auto before = engine::verify(**store);
    if (!before) return cannot_read(before.error());
    for (const auto& v : before->violations)
        std::cout << "found " << v.kind << ": " << v.detail << "\n";
    if (!apply) {
        std::cout << (before->violations.empty() ? "nothing to repair\n"
                                                 : "run with --apply to heal these\n");
        return before->violations.empty() ? 0 : kExitViolations;
    }
    (*store)->act_as_invocation();
    auto swept = engine::sweep(**store);
    if (!swept) return cannot_read(swept.error());
    auto rejournaled = engine::rejournal_allocations(**store);
    if (!rejournaled) return cannot_read(rejournaled.error());
    if (*rejournaled > 0)
        std::cout << "journaled " << *rejournaled << " allocations the journal lacked\n";
    std::cout << "reaped " << swept->dead_leases << " dead leases, healed " << swept->entries_healed
              << " attachments and " << swept->slots_healed << " addresses\n";
    auto after = engine::verify(**store);
    if (!after) return cannot_read(after.error());
    if (!after->violations.empty()) {
        // What the sweep cannot heal (a damaged word, a duplicate) the journal can: retire the
        // state; the next invocation rebuilds it from the journal.
        (void)(*store)->retire("shmipamctl repair: " + after->violations.front().kind);
        std::cout << after->violations.size()
                  << " violations left after healing: retired the network's state; the next "
                     "invocation rebuilds it from the journal\n";
        return kExitClean;
    }
    std::cout << verify_to_text(*after);
    return kExitClean;
}

}  // namespace shmipam::tools
