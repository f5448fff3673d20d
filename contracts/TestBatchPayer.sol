// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

interface IERC20Transfer {
    function transfer(address to, uint256 value) external returns (bool);
}

/// @title A stand-in for a contract wallet or a payout batcher, for tests only: it pays from its
/// own balance by calls made inside one transaction, which a block's transaction list does not show.
contract TestBatchPayer {
    /// Sends each of `amounts` of `token` (held by this contract) to `to`: one Transfer log each,
    /// all in the one transaction of this call.
    function payInParts(address token, address to, uint256[] calldata amounts) external {
        for (uint256 i = 0; i < amounts.length; i++) {
            require(IERC20Transfer(token).transfer(to, amounts[i]), "transfer failed");
        }
    }

    /// Forwards the native coin sent with this call to `to` by an internal call.
    function forward(address payable to) external payable {
        (bool ok, ) = to.call{value: msg.value}("");
        require(ok, "forward failed");
    }
}
