// SPDX-License-Identifier: Apache-2.0

// The stack loop's forwards: which path takes each one (the TCP or UDP
// fast path, or libslirp), their removal, and their move to libslirp when
// the tap turns out to have no vnet headers. Stack thread only.
#include "parent/stack_loop.hpp"

#include <sys/socket.h>

#include <string>

#include "common/error.hpp"

namespace rknp {

bool StackLoop::add_forward(const ForwardSpec &f) {
    const bool have_path = f.udp ? udp_fast_ != nullptr : fast_ != nullptr;
    if (!have_path || (tap_.attached() && !tap_.vnet_hdr())) {
        slirp_.add_forward(f);
        if (f.udp && udp_fast_) udp_fast_->keep_for_libslirp(f.guest, f.guest_port);
        return false;
    }
    sockaddr_storage ss;
    socklen_t len = f.host_sockaddr(ss);
    const sockaddr *host = reinterpret_cast<sockaddr *>(&ss);
    int err = f.udp ? udp_fast_->add_forward(host, len, f.guest, f.guest_port)
                    : fast_->add_forward(host, len, f.guest, f.guest_port);
    if (err != 0) throw_errno("forward " + f.host_side(), err);
    fast_forwards_.push_back(f);
    return true;
}

void StackLoop::remove_fast_forward(const ForwardSpec &f) {
    sockaddr_storage ss;
    socklen_t len = f.host_sockaddr(ss);
    const sockaddr *host = reinterpret_cast<sockaddr *>(&ss);
    if (f.udp)
        udp_fast_->remove_forward(host, len);
    else
        fast_->remove_forward(host, len);
}

void StackLoop::remove_forward(const ForwardSpec &f) {
    for (auto it = fast_forwards_.begin(); it != fast_forwards_.end(); ++it) {
        if (!it->same_host_side(f)) continue;
        remove_fast_forward(*it);
        fast_forwards_.erase(it);
        return;
    }
    slirp_.remove_forward(f);
    if (f.udp && udp_fast_) udp_fast_->release_to_fast_path(f.guest, f.guest_port);
}

void StackLoop::forwards_to_slirp() {
    for (const ForwardSpec &f : fast_forwards_) {
        remove_fast_forward(f);
        try {
            slirp_.add_forward(f);
            // Should a tap with vnet headers follow, the UDP fast path must
            // still leave this forward's guest end to libslirp.
            if (f.udp) udp_fast_->keep_for_libslirp(f.guest, f.guest_port);
            cfg_.logger.info("forward " + f.host_side() +
                             " moved to libslirp: the tap has no vnet headers");
        } catch (const Error &e) {
            cfg_.logger.error(std::string(e.what()) + " (moving it to libslirp: "
                              "the tap has no vnet headers)");
        }
    }
    fast_forwards_.clear();
}

} // namespace rknp
