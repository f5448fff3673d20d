// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title A stand-in for Multicall3 on anvil, for the devnet and tests only.
/// @notice Real networks have Multicall3 at 0xcA11bde05977b3631167028862bE2a173976CA11 (the same
/// address on every chain where it is deployed); anvil has nothing there. The devnet and tests put
/// this contract's code at that address, so the treasury and the block follower read balances the
/// way they do on a real network. It has the two functions they call, with Multicall3's signatures.
contract TestMulticall3 {
    struct Call3 {
        address target;
        bool allowFailure;
        bytes callData;
    }

    struct Result {
        bool success;
        bytes returnData;
    }

    function aggregate3(Call3[] calldata calls) external payable returns (Result[] memory results) {
        results = new Result[](calls.length);
        for (uint256 i = 0; i < calls.length; ++i) {
            (bool success, bytes memory answer) = calls[i].target.call(calls[i].callData);
            require(success || calls[i].allowFailure, "Multicall3: call failed");
            results[i] = Result(success, answer);
        }
    }

    function getEthBalance(address account) external view returns (uint256) {
        return account.balance;
    }
}
