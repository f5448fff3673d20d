// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title Chainlink AggregatorV3Interface mock for the devnet and tests.
/// `updateAnswer` publishes a fresh round; `setRoundData` writes any round verbatim so tests
/// can present stale, future-dated, zero or incomplete rounds.
contract MockAggregatorV3 {
    struct Round {
        int256 answer;
        uint256 startedAt;
        uint256 updatedAt;
        uint80 answeredInRound;
    }

    uint8 public immutable decimals;
    string public description;
    uint256 public constant version = 4;

    uint80 public latestRound;
    mapping(uint80 => Round) internal rounds;

    event AnswerUpdated(int256 indexed current, uint256 indexed roundId, uint256 updatedAt);
    event NewRound(uint256 indexed roundId, address indexed startedBy, uint256 startedAt);

    constructor(uint8 decimals_, string memory description_, int256 initialAnswer) {
        decimals = decimals_;
        description = description_;
        updateAnswer(initialAnswer);
    }

    /// Starts a new round answered now.
    function updateAnswer(int256 answer) public {
        uint80 roundId = latestRound + 1;
        latestRound = roundId;
        rounds[roundId] = Round(answer, block.timestamp, block.timestamp, roundId);
        emit NewRound(roundId, msg.sender, block.timestamp);
        emit AnswerUpdated(answer, roundId, block.timestamp);
    }

    /// Writes a round as given and makes it the latest one.
    function setRoundData(uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound) external {
        latestRound = roundId;
        rounds[roundId] = Round(answer, startedAt, updatedAt, answeredInRound);
        emit AnswerUpdated(answer, roundId, updatedAt);
    }

    function getRoundData(uint80 roundId)
        public
        view
        returns (uint80, int256, uint256, uint256, uint80)
    {
        Round memory r = rounds[roundId];
        require(r.updatedAt != 0 || r.answeredInRound != 0 || r.answer != 0, "No data present");
        return (roundId, r.answer, r.startedAt, r.updatedAt, r.answeredInRound);
    }

    function latestRoundData() external view returns (uint80, int256, uint256, uint256, uint80) {
        Round memory r = rounds[latestRound];
        return (latestRound, r.answer, r.startedAt, r.updatedAt, r.answeredInRound);
    }
}
