// SPDX-License-Identifier: Apache-2.0

// Command line of rknp-slirp4netns: slirp4netns 1.2's options, defaults,
// messages and exit codes (--help, --version, usage errors).
#include "cli.hpp"

#include <fcntl.h>
#include <getopt.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "cmd/common/version.hpp"

namespace s4n {

namespace {

constexpr const char *kDefaultCidr = "10.0.2.0/24";
constexpr unsigned kDefaultMtu = 1500;
constexpr unsigned kMaxMtu = 65521; // slirp4netns' bound (rknp's is 65520)

// rootlesskit and Podman probe `--help` for the option names, so every
// option slirp4netns lists appears here under the same name.
void usage(const char *argv0) {
    std::printf("Usage: %s [OPTION]... PID|PATH [TAPNAME]\n", argv0);
    std::printf("User-mode networking for unprivileged network namespaces "
                "(slirp4netns-compatible, on rknp).\n\n");
    std::printf("-c, --configure          bring up and configure the "
                "interface (address, route, MTU)\n");
    std::printf("-e, --exit-fd=FD         specify the FD for terminating "
                "rknp-slirp4netns\n");
    std::printf("-r, --ready-fd=FD        specify the FD to write to when the "
                "network is configured\n");
    std::printf("-m, --mtu=MTU            specify MTU (default=%u, max=65520; "
                "65521 is taken as 65520)\n", kDefaultMtu);
    std::printf("-6, --enable-ipv6        enable IPv6 (fd00::/64, gateway "
                "fd00::2, DNS fd00::3)\n");
    std::printf("-a, --api-socket=PATH    specify API socket path\n");
    std::printf("--cidr=CIDR              specify network address CIDR "
                "(default=%s)\n", kDefaultCidr);
    std::printf("--disable-host-loopback  prohibit connecting to 127.0.0.1:* "
                "on the host namespace\n");
    std::printf("--netns-type=TYPE        specify network namespace type "
                "([path|pid], default=pid)\n");
    std::printf("--userns-path=PATH       specify user namespace path\n");
    std::printf("--enable-sandbox         create a new mount namespace (and "
                "drop all caps except CAP_NET_BIND_SERVICE if running as the "
                "root)\n");
    std::printf("--enable-seccomp         enable seccomp to limit syscalls\n");
    std::printf("--outbound-addr=IPv4     sets outbound ipv4 address to bound "
                "to\n");
    std::printf("--outbound-addr6=IPv6    sets outbound ipv6 address to bound "
                "to\n");
    std::printf("--disable-dns            disables 10.0.2.3 (or configured "
                "internal ip) to host dns redirect\n");
    std::printf("--macaddress=MAC         specify the MAC address of the TAP "
                "(only valid with -c)\n");
    std::printf("--target-type=TYPE       specify the target type (only "
                "\"netns\" is supported)\n");
    std::printf("-h, --help               show this help and exit\n");
    std::printf("-v, --version            show version and exit\n");
}

// Machine-parsable like slirp4netns' (and runc's) --version.
void version() {
    std::printf("rknp-slirp4netns version %s (slirp4netns 1.2 compatible, "
                "on rknp)\n", cmd::rknp_version());
    cmd::print_library_versions();
}

[[noreturn]] void usage_error(const char *argv0) {
    usage(argv0);
    std::exit(EXIT_FAILURE);
}

// strtol over the whole string; false unless it is an integer in range.
bool parse_long(const char *s, long &out) {
    char *end = nullptr;
    errno = 0;
    out = std::strtol(s, &end, 10);
    return errno == 0 && end != s && *end == '\0';
}

enum : int {
    kCidr = 1000,
    kDisableHostLoopback,
    kNetnsType,
    kUsernsPath,
    kEnableSandbox,
    kEnableSeccomp,
    kOutboundAddr,
    kOutboundAddr6,
    kDisableDns,
    kMacaddress,
    kTargetType,
    kDeprecatedNoHostLoopback,
    kDeprecatedCreateSandbox,
};

// slirp4netns takes any number. One that is not open is noticed only when
// written (-r) or polled (-e), and by then a socket this process opened may
// have it: -r writes "1" to the API socket's listener and closes it, -e
// ends the run as soon as anyone connects; -r = -e closes the exit fd and
// the run ends at once. Checked here, before this process opens anything.
// -r is closed once written: 0, 1 or 2 there would hand the standard
// stream's number to the next socket (stderr's log lines into an API
// client). -e is only polled, never closed: stdin as the exit pipe stays
// possible, as with slirp4netns.
void check_fds(const Options &o, const char *argv0) {
    if (o.ready_fd >= 0 && o.ready_fd <= 2) {
        std::fprintf(stderr, "ready-fd must not be 0, 1 or 2 (it is closed "
                             "once written)\n");
        usage_error(argv0);
    }
    for (auto [fd, name] : {std::pair{o.ready_fd, "ready-fd"},
                            std::pair{o.exit_fd, "exit-fd"}}) {
        if (fd >= 0 && ::fcntl(fd, F_GETFD) < 0) {
            std::fprintf(stderr, "%s %d is not an open file descriptor\n",
                         name, fd);
            usage_error(argv0);
        }
    }
    if (o.ready_fd >= 0 && o.ready_fd == o.exit_fd) {
        std::fprintf(stderr, "ready-fd and exit-fd must be different file "
                             "descriptors\n");
        usage_error(argv0);
    }
}

} // namespace

Options parse_args(int argc, char *const argv[]) {
    static const option longopts[] = {
        {"configure", no_argument, nullptr, 'c'},
        {"exit-fd", required_argument, nullptr, 'e'},
        {"ready-fd", required_argument, nullptr, 'r'},
        {"mtu", required_argument, nullptr, 'm'},
        {"cidr", required_argument, nullptr, kCidr},
        {"disable-host-loopback", no_argument, nullptr, kDisableHostLoopback},
        {"no-host-loopback", no_argument, nullptr, kDeprecatedNoHostLoopback},
        {"netns-type", required_argument, nullptr, kNetnsType},
        {"userns-path", required_argument, nullptr, kUsernsPath},
        {"api-socket", required_argument, nullptr, 'a'},
        {"enable-ipv6", no_argument, nullptr, '6'},
        {"enable-sandbox", no_argument, nullptr, kEnableSandbox},
        {"create-sandbox", no_argument, nullptr, kDeprecatedCreateSandbox},
        {"enable-seccomp", no_argument, nullptr, kEnableSeccomp},
        {"help", no_argument, nullptr, 'h'},
        {"version", no_argument, nullptr, 'v'},
        {"outbound-addr", required_argument, nullptr, kOutboundAddr},
        {"outbound-addr6", required_argument, nullptr, kOutboundAddr6},
        {"disable-dns", no_argument, nullptr, kDisableDns},
        {"macaddress", required_argument, nullptr, kMacaddress},
        {"target-type", required_argument, nullptr, kTargetType},
        {nullptr, 0, nullptr, 0},
    };
    Options o;
    std::optional<std::string> netns_type, target_type;
    long n = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "ce:r:m:a:6hv", longopts,
                              nullptr)) != -1) {
        switch (opt) {
        case 'c':
            o.configure = true;
            break;
        case 'e':
            if (!parse_long(optarg, n) || n < 0 || n > INT32_MAX) {
                std::fprintf(stderr, "exit-fd must be a non-negative integer\n");
                usage_error(argv[0]);
            }
            o.exit_fd = int(n);
            break;
        case 'r':
            if (!parse_long(optarg, n) || n < 0 || n > INT32_MAX) {
                std::fprintf(stderr,
                             "ready-fd must be a non-negative integer\n");
                usage_error(argv[0]);
            }
            o.ready_fd = int(n);
            break;
        case 'm':
            if (!parse_long(optarg, n) || n <= 0 || n > long(kMaxMtu)) {
                std::fprintf(stderr, "MTU must be a positive integer (< 65522)\n");
                usage_error(argv[0]);
            }
            o.mtu = unsigned(n);
            break;
        case kCidr:
            o.cidr = optarg;
            break;
        case kDeprecatedNoHostLoopback:
            std::printf("WARNING: --no-host-loopback is deprecated and will be "
                        "removed in future releases, please use "
                        "--disable-host-loopback instead.\n");
            [[fallthrough]];
        case kDisableHostLoopback:
            o.disable_host_loopback = true;
            break;
        case kDeprecatedCreateSandbox:
            std::printf("WARNING: --create-sandbox is deprecated and will be "
                        "removed in future releases, please use "
                        "--enable-sandbox instead.\n");
            [[fallthrough]];
        case kEnableSandbox:
            o.enable_sandbox = true;
            break;
        case kEnableSeccomp:
            o.enable_seccomp = true;
            break;
        case kNetnsType:
            netns_type = optarg;
            break;
        case kUsernsPath:
            if (::access(optarg, F_OK) == -1) {
                std::fprintf(stderr, "userns path doesn't exist: %s\n", optarg);
                usage_error(argv[0]);
            }
            o.userns_path = optarg;
            break;
        case 'a':
            o.api_socket = optarg;
            break;
        case '6':
            o.enable_ipv6 = true;
            break;
        case 'h':
            usage(argv[0]);
            std::exit(EXIT_SUCCESS);
        case 'v':
            version();
            std::exit(EXIT_SUCCESS);
        case kOutboundAddr:
            o.outbound_addr = optarg;
            break;
        case kOutboundAddr6:
            o.outbound_addr6 = optarg;
            break;
        case kDisableDns:
            o.disable_dns = true;
            break;
        case kMacaddress:
            o.macaddress = optarg;
            break;
        case kTargetType:
            target_type = optarg;
            break;
        default: // getopt_long already printed "unrecognized option" etc.
            usage_error(argv[0]);
        }
    }
    if (o.macaddress && !o.configure) {
        std::fprintf(stderr, "--macaddr cannot be specified when --configure "
                             "or -c is not specified\n");
        usage_error(argv[0]);
    }
    if (target_type && *target_type != "netns") {
        if (*target_type == "bess")
            std::fprintf(stderr, "--target-type=bess is not supported by "
                                 "rknp-slirp4netns\n");
        else
            std::fprintf(stderr,
                         "--target-type must be either \"netns\" or \"bess\"\n");
        usage_error(argv[0]);
    }
    if (argc - optind < 2) usage_error(argv[0]);
    if (argc - optind > 2) std::printf("WARNING: too many arguments\n");
    if (netns_type && *netns_type != "pid" && *netns_type != "path") {
        // Newer slirp4netns has more types (tapfd); read as a path, a
        // file descriptor number would fail far from its cause.
        std::fprintf(stderr, "--netns-type must be either \"pid\" or "
                             "\"path\", not \"%s\"\n", netns_type->c_str());
        usage_error(argv[0]);
    }
    if (!netns_type || *netns_type == "pid") {
        if (!parse_long(argv[optind], n) || n <= 0 || n > INT32_MAX) {
            std::fprintf(stderr, "PID must be a positive integer\n");
            usage_error(argv[0]);
        }
        o.target_pid = pid_t(n);
    } else {
        if (::access(argv[optind], F_OK) == -1) {
            std::perror("existing path expected when --netns-type=path");
            usage_error(argv[0]);
        }
        o.netns_path = argv[optind];
    }
    o.tapname = argv[optind + 1];
    check_fds(o, argv[0]);
    return o;
}

} // namespace s4n
