// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

interface IERC20Balance {
    function balanceOf(address account) external view returns (uint256);
}

/// @title DepositAccount: the code a deposit address runs once its own key delegates to it (EIP-7702).
/// @notice Nothing moves without a signature by the deposit address's own key (EIP-712, with the
/// deposit address as `verifyingContract`), so anyone may submit a signed call and pay its gas:
///  - `sweep`: the whole balance of each signed token (and of the native coin, when signed) to the
///    signed address, until the signed deadline. Each signature is good for one sweep: it names
///    the address's sweep nonce, which the sweep moves on, so the same signature sent again (by
///    anyone) moves nothing.
///  - `pay`: an exact amount of one token (or of the native coin: token 0) to one address, at most
///    once per signed id (a refund), whoever submits it and however often, until the signed
///    deadline (after it, a signature that was never used can never pay).
/// At its own address (never under a delegation) `batch` forwards such calls to many deposit
/// addresses in one transaction, which the merchant's gas account sends and pays for, and `topUp`
/// sends native coin to many addresses in one transaction (on a chain without EIP-7702, each
/// deposit address then pays its own transfer's fee).
/// The contract keeps no owner, no upgrade path and no funds of its own.
contract DepositAccount {
    struct Call {
        address account;
        bytes data;
    }

    bytes32 private constant DOMAIN_TYPEHASH = keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 private constant NAME_HASH = keccak256("CryptoPay DepositAccount");
    bytes32 private constant VERSION_HASH = keccak256("1");
    bytes32 public constant SWEEP_TYPEHASH = keccak256("Sweep(address to,address[] tokens,bool native,uint256 nonce,uint256 deadline)");
    bytes32 public constant PAY_TYPEHASH = keccak256("Pay(bytes32 id,address token,address to,uint256 amount,uint256 deadline)");
    /// ERC-7201 namespace "cryptopay.deposit-account", in the deposit address's own storage, away
    /// from any slot another contract it once delegated to may use: the ids already paid (a mapping
    /// from it), and at its base slot the sweep nonce. Version 1 of this contract kept its paid ids
    /// at the same slots, so an address re-delegated from it still refuses an id it paid.
    bytes32 private constant PAID_NAMESPACE = keccak256(abi.encode(uint256(keccak256("cryptopay.deposit-account")) - 1)) & ~bytes32(uint256(0xff));
    /// secp256k1's n / 2: a signature with a larger `s` is the malleated twin of a valid one.
    uint256 private constant HALF_N = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;

    /// This contract's own address: `batch` runs only there, never in a deposit address's context.
    address private immutable SELF = address(this);

    event Swept(address indexed token, address indexed to, uint256 amount);
    event Paid(bytes32 indexed id, address indexed token, address indexed to, uint256 amount);

    error Expired();
    error BadSignature();
    error AlreadyPaid(bytes32 id);
    error TransferFailed(address token);
    error OnlyAtOwnAddress();
    error NotASignedCall(uint256 index);
    error OutOfGas(uint256 index);
    error NotDelegated();
    error WrongNonce(uint256 expected);
    error TopUpMismatch();

    /// A deposit address takes native coin as it did before it delegated. The contract's own
    /// address takes none: it holds nothing, and what was sent there could never leave.
    receive() external payable {
        if (address(this) == SELF) revert NotDelegated();
    }

    function sweep(address to, address[] calldata tokens, bool native, uint256 nonce, uint256 deadline, bytes calldata signature) external {
        if (block.timestamp > deadline) revert Expired();
        _verify(keccak256(abi.encode(SWEEP_TYPEHASH, to, keccak256(abi.encodePacked(tokens)), native, nonce, deadline)), signature);
        bytes32 slot = PAID_NAMESPACE;
        uint256 expected;
        assembly {
            expected := sload(slot)
        }
        if (nonce != expected) revert WrongNonce(expected);
        // Moved on before anything is sent: a token calling back cannot sweep twice with it.
        assembly {
            sstore(slot, add(expected, 1))
        }
        for (uint256 i = 0; i < tokens.length; ++i) {
            uint256 amount = IERC20Balance(tokens[i]).balanceOf(address(this));
            if (amount > 0) {
                _send(tokens[i], to, amount);
                emit Swept(tokens[i], to, amount);
            }
        }
        if (native) {
            uint256 amount = address(this).balance;
            if (amount > 0) {
                _send(address(0), to, amount);
                emit Swept(address(0), to, amount);
            }
        }
    }

    function pay(bytes32 id, address token, address to, uint256 amount, uint256 deadline, bytes calldata signature) external {
        if (block.timestamp > deadline) revert Expired();
        _verify(keccak256(abi.encode(PAY_TYPEHASH, id, token, to, amount, deadline)), signature);
        bytes32 slot = keccak256(abi.encode(id, PAID_NAMESPACE));
        uint256 done;
        assembly {
            done := sload(slot)
        }
        if (done != 0) revert AlreadyPaid(id);
        // Marked before the transfer: a token calling back cannot have it paid twice.
        assembly {
            sstore(slot, 1)
        }
        _send(token, to, amount);
        emit Paid(id, token, to, amount);
    }

    /// The nonce the deposit address's next sweep signature must name.
    function sweepNonce() external view returns (uint256 nonce) {
        bytes32 slot = PAID_NAMESPACE;
        assembly {
            nonce := sload(slot)
        }
    }

    /// Whether the deposit address this runs at has paid `id`.
    function paid(bytes32 id) external view returns (bool) {
        bytes32 slot = keccak256(abi.encode(id, PAID_NAMESPACE));
        uint256 done;
        assembly {
            done := sload(slot)
        }
        return done != 0;
    }

    /// Forwards each call (a signed `sweep` or `pay`) to its deposit address; one that fails, or an
    /// address without code (not delegated yet), is reported as false and the others go on. A call
    /// that failed for want of gas (its own, or a transfer's inside it) reverts the whole batch
    /// instead, so a gas estimate (which looks for the least gas the transaction succeeds with)
    /// never settles on one that starves a call.
    function batch(Call[] calldata calls) external returns (bool[] memory ok) {
        if (address(this) != SELF) revert OnlyAtOwnAddress();
        ok = new bool[](calls.length);
        for (uint256 i = 0; i < calls.length; ++i) {
            bytes calldata data = calls[i].data;
            if (data.length < 4 || (bytes4(data[:4]) != this.sweep.selector && bytes4(data[:4]) != this.pay.selector)) revert NotASignedCall(i);
            if (calls[i].account.code.length == 0) continue;
            uint256 before = gasleft();
            bytes memory answer;
            (ok[i], answer) = calls[i].account.call(data);
            // EIP-150 leaves a caller 1/64 of its gas: this little left means the call ran out of gas.
            if (!ok[i] && (gasleft() <= before / 64 || (answer.length >= 4 && bytes4(answer) == OutOfGas.selector))) revert OutOfGas(i);
        }
    }

    /// At its own address only: sends `amounts[i]` of the native coin to `to[i]`, all of them or
    /// none, and exactly `msg.value` in all (a chain without EIP-7702: the gas account funds many
    /// deposit addresses' own fees in one transaction).
    function topUp(address[] calldata to, uint256[] calldata amounts) external payable {
        if (address(this) != SELF) revert OnlyAtOwnAddress();
        if (to.length != amounts.length) revert TopUpMismatch();
        uint256 total;
        for (uint256 i = 0; i < to.length; ++i) {
            total += amounts[i];
            (bool sent, ) = to[i].call{value: amounts[i]}("");
            if (!sent) revert TransferFailed(address(0));
        }
        if (total != msg.value) revert TopUpMismatch();
    }

    function _verify(bytes32 structHash, bytes calldata signature) private view {
        if (signature.length != 65) revert BadSignature();
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        if (uint256(s) > HALF_N || (v != 27 && v != 28)) revert BadSignature();
        bytes32 domain = keccak256(abi.encode(DOMAIN_TYPEHASH, NAME_HASH, VERSION_HASH, block.chainid, address(this)));
        address signer = ecrecover(keccak256(abi.encodePacked("\x19\x01", domain, structHash)), v, r, s);
        if (signer == address(0) || signer != address(this)) revert BadSignature();
    }

    /// Sends native coin (token 0) or an ERC-20, accepting tokens that return nothing (USDT).
    function _send(address token, address to, uint256 amount) private {
        uint256 before = gasleft();
        bool sent;
        if (token == address(0)) {
            (sent, ) = to.call{value: amount}("");
        } else if (token.code.length > 0) {
            bytes memory answer;
            (sent, answer) = token.call(abi.encodeWithSelector(0xa9059cbb, to, amount));
            sent = sent && (answer.length == 0 || (answer.length >= 32 && abi.decode(answer, (bool))));
        }
        if (!sent) {
            // The transfer ran out of gas (this frame kept only 1/64): a higher gas limit would not fail it.
            if (gasleft() <= before / 64) revert OutOfGas(type(uint256).max);
            revert TransferFailed(token);
        }
    }
}
