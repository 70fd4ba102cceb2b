// Where the helpers' shared libraries are shipped, and how a helper is started on them.
//
// The helpers (shmipam-cluster, shmipam-kube) are dynamic: they link libcurl, which has no
// static build here. They are shipped with every library they load, the C library and its
// dynamic loader included, in kShippedLibDir beside them (deploy/build-image.sh; `shmipamctl
// install` copies it onto each node). The plugin starts a helper through that loader, so a
// helper asks the host for nothing but the kernel: a node with an older glibc (RHEL 8, Ubuntu
// 22.04, Amazon Linux 2023), musl, or no C library at all (Talos, Bottlerocket) runs it.
//
//   <bin>/shmipam-lib/ld-linux-x86-64.so.2 --inhibit-cache --library-path <bin>/shmipam-lib
//       --argv0 <bin>/shmipam-kube <bin>/shmipam-kube
//
// --library-path: every library, libc.so.6 first, comes from kShippedLibDir (the loader and
// the C library must be of one build). --inhibit-cache: the host's /etc/ld.so.cache, written
// by another C library's ldconfig, is never read.
#pragma once

namespace shmipam {

// The directory beside the helpers that holds their libraries.
inline constexpr const char* kShippedLibDir = "shmipam-lib";

// The dynamic loader of the C library the helpers were built with, by its file name (the name
// its PT_INTERP gives on this architecture).
#if defined(__x86_64__)
inline constexpr const char* kShippedLoader = "ld-linux-x86-64.so.2";
#elif defined(__aarch64__)
inline constexpr const char* kShippedLoader = "ld-linux-aarch64.so.1";
#else
#error "name this architecture's glibc dynamic loader"
#endif

}  // namespace shmipam
