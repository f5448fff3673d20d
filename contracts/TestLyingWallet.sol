// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title A hostile EIP-1271 wallet, for the relayer's attack tests only
/// (test/attacks/relayer.test.ts). Its `isValidSignature` answers "valid" when the transaction pays
/// no more per gas than the block's base fee, which is what a node's `eth_call` and
/// `eth_estimateGas` without fee fields see, and "invalid" in any real transaction, after burning
/// `burn` rounds of hashing (the expensive kind; 0: the cheap kind). A relayer that believed its
/// simulation pays for every revert. `burn` is immutable, so the same code works behind an
/// EIP-7702 delegation, whose account has storage of its own.
contract TestLyingWallet {
    uint256 public immutable burn;

    constructor(uint256 burn_) {
        burn = burn_;
    }

    function isValidSignature(bytes32, bytes memory) external view returns (bytes4) {
        if (tx.gasprice <= block.basefee) return 0x1626ba7e;
        uint256 x;
        for (uint256 i = 0; i < burn; i++) x = uint256(keccak256(abi.encode(x, i)));
        // Never true: it only keeps the loop from being optimised away.
        return x == 1 ? bytes4(0x1626ba7e) : bytes4(0xffffffff);
    }
}
