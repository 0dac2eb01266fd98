#!/usr/bin/env bash
# Issue 12: case 41's audit on the slower jobs (Triton, torch.compile), in a
# case of their own so that each stays within CASE_TIMEOUT.
BACKSTOP_JOBS="triton compile" exec "$(dirname "$0")/41_backstop_torch_audit.sh"
